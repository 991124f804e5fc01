import NavigationCore

extension Screen where Subject == CounterModel {
    /// The fact is a sheet, settings a drill-down, a failed fetch an alert.
    static func counter(_ dependencies: FeatureDependencies, settings: Screen<SettingsModel>) -> Screen<CounterModel> {
        let fact = Screen<Fact>.value("fact") { Fact(value: "") }
        let failure = Screen<FactFailure>.value("factFailure") { FactFailure(message: "") }
        let destination = DestinationField<CounterModel, CounterModel.Destination>("destination", \.destination, [
            .value("fact", style: .sheet, fact, identity: { .value(.string($0.value)) },
                   embed: { .fact($0) }, extract: { if case .fact(let fact) = $0 { fact } else { nil } }),
            .model("settings", style: .drillDown, settings,
                   embed: { .settings($0) }, extract: { if case .settings(let model) = $0 { model } else { nil } }),
            .value("alert", style: .alert, failure, identity: { .value(.string($0.message)) },
                   alert: { _, failure in AlertContent(title: "Couldn't fetch a fact", message: failure.message, buttons: [.ok]) },
                   embed: { .alert($0) }, extract: { if case .alert(let failure) = $0 { failure } else { nil } }),
        ])
        return Screen("counter", make: { CounterModel(factClient: dependencies.factClient) },
            fields: [
                .value("count", \.count, .int),
                .value("factIsLoading", \.factIsLoading, .bool),
                destination.field,
            ],
            actions: [
                .sync("incrementButtonTapped") { $0.incrementButtonTapped() },
                .sync("decrementButtonTapped") { $0.decrementButtonTapped() },
                .task("factButtonTapped") { await $0.factButtonTapped() },
                .sync("settingsButtonTapped") { $0.settingsButtonTapped() },
                .sync("dismissFactButtonTapped") { $0.dismissFactButtonTapped() },
            ],
            presentations: destination.slots,
            // A fetch cut off by a restart is over: no fact, no alert, and no spinner left behind.
            settle: { counter in
                if counter.factIsLoading { counter.factIsLoading = false }
                return nil
            }
        )
    }
}
