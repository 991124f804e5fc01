import NavigationCore

extension Screen where Subject == GalleryModel {
    /// One destination per style and kind of driving state, declared in a loop over the styles.
    static func gallery(_ dependencies: FeatureDependencies, counter: Screen<CounterModel>) -> Screen<GalleryModel> {
        let item = Screen<GalleryItem>.value("item") { GalleryItem(id: "", title: "") }
        let textEditor = Screen<String>("textEditor", make: { "" }) {
            Field("text", \.self, bindable: true)
        }
        // A `nil` default says nothing of its type: the catalog is told it is a number.
        let timedAlert = Screen<TimedAlert>.value("timedAlert", refining: [Field("dismissesAt", \.dismissesAt)]) {
            TimedAlert(id: 0)
        }
        let styleArgument = Action<GalleryModel>.Argument.value("style", .galleryStyle)
        return Screen("gallery", make: { GalleryModel(dependencies: dependencies) }) {
            Field("itemsMade", \.itemsMade)
            Field("timedAlertsShown", \.timedAlertsShown)
            for style in GalleryStyle.allCases {
                PresentationSlot.isPresented("\(style.rawValue)IsPresented", style: style.presentation, \.[isPresented: style],
                                             screen: style.asksUser ? .alert : .page, anchor: style.anchor, bindable: true,
                                             alert: style.boolAlert)
                PresentationSlot.item("\(style.rawValue)Item", style: style.presentation, \.items[style], screen: item,
                                      anchor: style.anchor, alert: style.itemAlert)
            }
            DestinationField("destination", \.destination, [
                .value("alert", style: .alert, item,
                       alert: { _, item in GalleryStyle.alert.content(title: item.title) },
                       embed: { .alert($0) }, extract: { if case .alert(let item) = $0 { item } else { nil } }),
                .value("confirmationDialog", style: .confirmationDialog, item,
                       alert: { _, item in GalleryStyle.confirmationDialog.content(title: item.title) },
                       embed: { .confirmationDialog($0) }, extract: { if case .confirmationDialog(let item) = $0 { item } else { nil } }),
                .model("sheet", style: .sheet, counter,
                       embed: { .sheet($0) }, extract: { if case .sheet(let model) = $0 { model } else { nil } }),
                .model("popover", style: .popover, counter, anchor: GalleryStyle.popover.anchor,
                       embed: { .popover($0) }, extract: { if case .popover(let model) = $0 { model } else { nil } }),
                .model("fullScreenCover", style: .fullScreenCover, counter,
                       embed: { .fullScreenCover($0) }, extract: { if case .fullScreenCover(let model) = $0 { model } else { nil } }),
                .model("drillDown", style: .drillDown, counter,
                       embed: { .drillDown($0) }, extract: { if case .drillDown(let model) = $0 { model } else { nil } }),
            ])
            PresentationSlot.model("nested", style: .sheet, \.nested, screen: .nested())
            // Presented by unwrapping the optional: edits write straight back into it, so the
            // sheet stays the same sheet while its text changes.
            PresentationSlot.item("text", style: .sheet, \.text, screen: textEditor, ownerCodec: .string)
            PresentationSlot.item("timedAlert", style: .alert, \.timedAlert, screen: timedAlert,
                                  alert: { _, _ in AlertContent(title: "This alert dismisses itself", buttons: [.ok]) })
            Action.sync("isPresentedButtonTapped", styleArgument) { $0.isPresentedButtonTapped($1) }
            Action.sync("itemButtonTapped", styleArgument) { $0.itemButtonTapped($1) }
            Action.sync("destinationButtonTapped", styleArgument) { $0.destinationButtonTapped($1) }
            Action.sync("sheetAndPopoverButtonTapped") { $0.sheetAndPopoverButtonTapped() }
            Action.sync("nestedButtonTapped") { $0.nestedButtonTapped() }
            Action.sync("editTextButtonTapped") { $0.editTextButtonTapped() }
            Action.task("timedAlertButtonTapped") { await $0.timedAlertButtonTapped() }
            // A restart stopped the alert's timer; it goes on with the time the alert had left,
            // or the alert goes now if it had none left.
            Settle { gallery in
                let model = gallery
                return model.settleTimedAlert() ? Effect { await model.continueTimedAlert() } : nil
            }
        }
    }
}

extension Screen where Subject == NestedModel {
    /// Presents its own kind, as deep as the user goes.
    static func nested() -> Screen<NestedModel> {
        .recursive("nested", make: { NestedModel(level: 1) }) { nested in
            Field("level", \.level)
            PresentationSlot.model("child", style: .sheet, \.child, screen: nested)
            Action.sync("presentChildButtonTapped") { $0.presentChildButtonTapped() }
        }
    }
}

extension StateCodec where Value == GalleryStyle {
    static var galleryStyle: StateCodec<GalleryStyle> {
        let names = GalleryStyle.allCases.map(\.rawValue)
        return StateCodec(schema: .string(allowed: names), encode: { .string($0.rawValue) }) { json, path, _ throws(StateError) in
            guard let style = json.stringValue.flatMap(GalleryStyle.init(rawValue:)) else {
                throw StateError(path, "expected one of \(names.joined(separator: ", "))")
            }
            return style
        }
    }
}

extension GalleryStyle {
    var presentation: PresentationStyle {
        switch self {
        case .alert: .alert
        case .confirmationDialog: .confirmationDialog
        case .sheet: .sheet
        case .popover: .popover
        case .fullScreenCover: .fullScreenCover
        case .drillDown: .drillDown
        }
    }

    /// An alert or a dialog, whose content asks the user something.
    var asksUser: Bool { self == .alert || self == .confirmationDialog }

    /// What an alert or dialog of this style says when a Bool presents it; nil for other styles.
    var boolAlert: (@Sendable (GalleryModel) -> AlertContent<GalleryModel>)? {
        guard asksUser else { return nil }
        let content = content(title: "Presented by a Bool")
        return { _ in content }
    }

    /// What an alert or dialog of this style says when an item presents it; nil for other styles.
    var itemAlert: (@Sendable (GalleryModel, GalleryItem) -> AlertContent<GalleryModel>)? {
        guard asksUser else { return nil }
        return { [self] _, item in content(title: item.title) }
    }

    /// The control a popover points at.
    var anchor: String? { self == .popover ? "popoverButton" : nil }

    func content(title: String) -> AlertContent<GalleryModel> {
        switch self {
        case .confirmationDialog:
            AlertContent(title: title, buttons: [AlertButton("Confirm"), .cancel])
        default:
            AlertContent(title: title, buttons: [.ok])
        }
    }
}
