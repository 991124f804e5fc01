import NavigationCore

extension Screen where Subject == CounterModel {
    /// The fact is a sheet, settings a drill-down, a failed fetch an alert.
    static func counter(_ dependencies: FeatureDependencies, settings: Screen<SettingsModel>) -> Screen<CounterModel> {
        Screen("counter", make: { CounterModel(factClient: dependencies.factClient) }) {
            Field("count", \.count)
            Field("factIsLoading", \.factIsLoading)
            DestinationField("destination", \.destination, [
                .value("fact", style: .sheet, .value("fact") { Fact(value: "") },
                       embed: { .fact($0) }, extract: { if case .fact(let fact) = $0 { fact } else { nil } }),
                .model("settings", style: .drillDown, settings,
                       embed: { .settings($0) }, extract: { if case .settings(let model) = $0 { model } else { nil } }),
                .value("alert", style: .alert, .value("factFailure") { FactFailure(message: "") },
                       alert: { _, failure in AlertContent(title: "Couldn't fetch a fact", message: failure.message, buttons: [.ok]) },
                       embed: { .alert($0) }, extract: { if case .alert(let failure) = $0 { failure } else { nil } }),
            ])
            Action.sync("incrementButtonTapped") { $0.incrementButtonTapped() }
            Action.sync("decrementButtonTapped") { $0.decrementButtonTapped() }
            Action.task("factButtonTapped") { await $0.factButtonTapped() }
            Action.sync("settingsButtonTapped") { $0.settingsButtonTapped() }
            Action.sync("dismissFactButtonTapped") { $0.dismissFactButtonTapped() }
            // A fetch cut off by a restart is over: no fact, no alert, and no spinner left behind.
            Settle.lowering(\.factIsLoading)
        }
    }
}
