import NavigationCore

extension Screen where Subject == AppModel {
    /// The path is a navigation stack of counters and settings screens.
    static func app(
        _ dependencies: FeatureDependencies,
        counter: Screen<CounterModel>,
        settings: Screen<SettingsModel>
    ) -> Screen<AppModel> {
        Screen("app", make: { AppModel(dependencies: dependencies) }) {
            StackSlot.path("path", \.path, edit: { model, body in body(&model.path) }, [
                .model("counter", counter, embed: { .counter($0) }, extract: \.counter),
                .model("settings", settings, embed: { .settings($0) }, extract: \.settings),
            ])
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
