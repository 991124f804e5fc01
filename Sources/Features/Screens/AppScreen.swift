import NavigationCore

extension Screen where Subject == AppModel {
    /// The path is a navigation stack of counters and settings screens.
    static func app(
        _ dependencies: FeatureDependencies,
        counter: Screen<CounterModel>,
        settings: Screen<SettingsModel>
    ) -> Screen<AppModel> {
        let path = StateCodec<AppModel.Path>.oneOf("Path", [
            EnumCase("counter", counter.codec, embed: { .counter($0) }, extract: \.counter),
            EnumCase("settings", settings.codec, embed: { .settings($0) }, extract: \.settings),
        ])
        return Screen("app", make: { AppModel(dependencies: dependencies) }) {
            StackSlot.path("path", \.path, edit: { model, body in body(&model.path) },
                           accepts: ["counter", "settings"], screens: [counter, settings], codec: path,
                           feature: { element in
                               switch element {
                               case .counter(let model): StackElement(model, counter)
                               case .settings(let model): StackElement(model, settings)
                               }
                           })
            Action.sync("counterButtonTapped") { $0.counterButtonTapped() }
            Action.sync("settingsButtonTapped") { $0.settingsButtonTapped() }
        }
    }
}

extension AppModel.Path {
    var counter: CounterModel? {
        if case .counter(let model) = self { model } else { nil }
    }

    var settings: SettingsModel? {
        if case .settings(let model) = self { model } else { nil }
    }
}
