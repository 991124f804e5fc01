import NavigationCore

extension Screen where Subject == GalleryModel {
    /// One destination per style and kind of driving state, declared in a loop over the styles.
    static func gallery(
        _ dependencies: FeatureDependencies,
        counter: Screen<CounterModel>,
        alert: Screen<Presence>,
        page: Screen<Presence>
    ) -> Screen<GalleryModel> {
        let item = Screen<GalleryItem>.value("item") { GalleryItem(id: "", title: "") }
        let nested = Screen<NestedModel>.nested()
        let textEditor = Screen<String>("textEditor", make: { "" }, fields: [
            .value("text", \.self, .string, bindable: true),
        ])
        // A `nil` default says nothing of its type: the catalog is told it is a number.
        let timedAlert = Screen<TimedAlert>.value("timedAlert", refining: [.value("dismissesAt", \.dismissesAt, .optional(.double))]) {
            TimedAlert(id: 0)
        }

        let destination = StateCodec<GalleryModel.Destination>.oneOf("Destination", [
            EnumCase("alert", item.codec, embed: { .alert($0) }, extract: \.alert),
            EnumCase("confirmationDialog", item.codec, embed: { .confirmationDialog($0) }, extract: \.confirmationDialog),
            EnumCase("sheet", counter.codec, embed: { .sheet($0) }, extract: \.sheet),
            EnumCase("popover", counter.codec, embed: { .popover($0) }, extract: \.popover),
            EnumCase("fullScreenCover", counter.codec, embed: { .fullScreenCover($0) }, extract: \.fullScreenCover),
            EnumCase("drillDown", counter.codec, embed: { .drillDown($0) }, extract: \.drillDown),
        ])

        var fields: [Field<GalleryModel>] = []
        var presentations: [PresentationSlot<GalleryModel>] = []
        for style in GalleryStyle.allCases {
            let presentation = style.presentation
            let anchor = style == .popover ? "popoverButton" : nil
            let asksUser = style == .alert || style == .confirmationDialog
            let isPresented: WritableKeyPath<GalleryModel, Bool> & Sendable = \GalleryModel.[isPresented: style]
            let presentedItem: WritableKeyPath<GalleryModel, GalleryItem?> & Sendable = \GalleryModel.items[style]
            var boolAlert: (@Sendable (GalleryModel) -> AlertContent)?
            var itemAlert: (@Sendable (GalleryModel, GalleryItem) -> AlertContent)?
            if asksUser {
                let boolContent = style.content(title: "Presented by a Bool")
                boolAlert = { _ in boolContent }
                itemAlert = { _, item in style.content(title: item.title) }
            }
            fields.append(.value("\(style.rawValue)IsPresented", isPresented, .bool, bindable: true))
            fields.append(.children("\(style.rawValue)Item", presentedItem, .optional(item.codec)))
            presentations.append(.isPresented(
                "\(style.rawValue)IsPresented", style: presentation, isPresented,
                screen: asksUser ? alert : page, anchor: anchor,
                alert: boolAlert
            ))
            presentations.append(.item(
                "\(style.rawValue)Item", style: presentation, presentedItem, screen: item, anchor: anchor,
                identity: { .id($0.id) },
                alert: itemAlert
            ))
        }
        fields += [
            .children("destination", \.destination, .optional(destination)),
            .children("nested", \.nested, .optional(nested.codec)),
            .children("text", \.text, .optional(.string)),
            .children("timedAlert", \.timedAlert, .optional(timedAlert.codec)),
        ]
        presentations += [
            .value("destination.alert", style: .alert, item, identity: { .id($0.id) },
                   alert: { _, item in GalleryStyle.alert.content(title: item.title) },
                   unwrap: { $0.destination?.alert }, embed: { $0.destination = .alert($1) },
                   dismiss: { $0.destination = nil }),
            .value("destination.confirmationDialog", style: .confirmationDialog, item, identity: { .id($0.id) },
                   alert: { _, item in GalleryStyle.confirmationDialog.content(title: item.title) },
                   unwrap: { $0.destination?.confirmationDialog }, embed: { $0.destination = .confirmationDialog($1) },
                   dismiss: { $0.destination = nil }),
            .model("destination.sheet", style: .sheet, counter,
                   unwrap: { $0.destination?.sheet }, dismiss: { $0.destination = nil }),
            .model("destination.popover", style: .popover, counter, anchor: "popoverButton",
                   unwrap: { $0.destination?.popover }, dismiss: { $0.destination = nil }),
            .model("destination.fullScreenCover", style: .fullScreenCover, counter,
                   unwrap: { $0.destination?.fullScreenCover }, dismiss: { $0.destination = nil }),
            .model("destination.drillDown", style: .drillDown, counter,
                   unwrap: { $0.destination?.drillDown }, dismiss: { $0.destination = nil }),
            .model("nested", style: .sheet, nested, unwrap: { $0.nested }, dismiss: { $0.nested = nil }),
            // Presented by unwrapping the optional: edits write straight back into it, so the
            // sheet stays the same sheet while its text changes.
            .value("text", style: .sheet, textEditor, identity: { _ in .presence },
                   unwrap: { $0.text }, embed: { $0.text = $1 }, dismiss: { $0.text = nil }),
            .item("timedAlert", style: .alert, \.timedAlert, screen: timedAlert,
                  identity: { .value(.int($0.id)) },
                  alert: { _, _ in AlertContent(title: "This alert dismisses itself", buttons: [.ok]) }),
        ]

        let styleParameter = Action<GalleryModel>.Parameter("style", StateCodec<GalleryStyle>.galleryStyle)
        return Screen("gallery", make: { GalleryModel(dependencies: dependencies) },
            fields: fields,
            actions: [
                .sync("isPresentedButtonTapped", [styleParameter]) { model, arguments throws(StateError) in
                    model.isPresentedButtonTapped(try arguments.decode("style", .galleryStyle))
                },
                .sync("itemButtonTapped", [styleParameter]) { model, arguments throws(StateError) in
                    model.itemButtonTapped(try arguments.decode("style", .galleryStyle))
                },
                .sync("destinationButtonTapped", [styleParameter]) { model, arguments throws(StateError) in
                    model.destinationButtonTapped(try arguments.decode("style", .galleryStyle))
                },
                .sync("sheetAndPopoverButtonTapped") { $0.sheetAndPopoverButtonTapped() },
                .sync("nestedButtonTapped") { $0.nestedButtonTapped() },
                .sync("editTextButtonTapped") { $0.editTextButtonTapped() },
                .task("timedAlertButtonTapped") { await $0.timedAlertButtonTapped() },
            ],
            presentations: presentations,
            // A restart stopped the alert's timer; it goes on with the time the alert had left.
            settle: { gallery in
                let model = gallery
                return model.timedAlertIsTimed ? Effect { await model.continueTimedAlert() } : nil
            }
        )
    }
}

extension Screen where Subject == NestedModel {
    /// Presents its own kind, as deep as the user goes.
    static func nested() -> Screen<NestedModel> {
        Screen("nested", make: { NestedModel(level: 1) }) { nested in
            ScreenBody(
                fields: [
                    .value("level", \.level, .int),
                    .children("child", \.child, .optional(nested.codec)),
                ],
                actions: [.sync("presentChildButtonTapped") { $0.presentChildButtonTapped() }],
                presentations: [
                    .model("child", style: .sheet, nested, unwrap: { $0.child }, dismiss: { $0.child = nil }),
                ]
            )
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

    func content(title: String) -> AlertContent {
        switch self {
        case .confirmationDialog:
            AlertContent(title: title, buttons: [AlertButton("Confirm"), .cancel])
        default:
            AlertContent(title: title, buttons: [.ok])
        }
    }
}

extension GalleryModel.Destination {
    var alert: GalleryItem? { if case .alert(let item) = self { item } else { nil } }
    var confirmationDialog: GalleryItem? { if case .confirmationDialog(let item) = self { item } else { nil } }
    var sheet: CounterModel? { if case .sheet(let model) = self { model } else { nil } }
    var popover: CounterModel? { if case .popover(let model) = self { model } else { nil } }
    var fullScreenCover: CounterModel? { if case .fullScreenCover(let model) = self { model } else { nil } }
    var drillDown: CounterModel? { if case .drillDown(let model) = self { model } else { nil } }
}
