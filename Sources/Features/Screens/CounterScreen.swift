import NavigationCore

extension Screen where Subject == CounterModel {
    /// The fact is a sheet, settings a drill-down, a failed fetch an alert.
    static func counter(_ dependencies: FeatureDependencies, settings: Screen<SettingsModel>) -> Screen<CounterModel> {
        let fact = Screen<Fact>("fact", make: { Fact(value: "") }, fields: [.value("value", \.value, .string)])
        let failure = Screen<FactFailure>("factFailure", make: { FactFailure(message: "") }, fields: [
            .value("message", \.message, .string),
        ])
        let destination = StateCodec<CounterModel.Destination>.oneOf("Destination", [
            EnumCase("fact", fact.codec, embed: { .fact($0) }, extract: \.fact),
            EnumCase("settings", settings.codec, embed: { .settings($0) }, extract: \.settings),
            EnumCase("alert", failure.codec, embed: { .alert($0) }, extract: \.alert),
        ])
        return Screen("counter", make: { CounterModel(factClient: dependencies.factClient) },
            fields: [
                .value("count", \.count, .int),
                .value("factIsLoading", \.factIsLoading, .bool),
                .children("destination", \.destination, .optional(destination)),
            ],
            actions: [
                .sync("incrementButtonTapped") { $0.incrementButtonTapped() },
                .sync("decrementButtonTapped") { $0.decrementButtonTapped() },
                .task("factButtonTapped") { await $0.factButtonTapped() },
                .sync("settingsButtonTapped") { $0.settingsButtonTapped() },
                .sync("dismissFactButtonTapped") { $0.dismissFactButtonTapped() },
            ],
            presentations: [
                .value("destination.fact", style: .sheet, fact,
                       identity: { .value(.string($0.value)) },
                       unwrap: { $0.destination?.fact },
                       embed: { $0.destination = .fact($1) },
                       dismiss: { $0.destination = nil }),
                .model("destination.settings", style: .drillDown, settings,
                       unwrap: { $0.destination?.settings },
                       dismiss: { $0.destination = nil }),
                .value("destination.alert", style: .alert, failure,
                       identity: { .value(.string($0.message)) },
                       alert: { _, failure in
                           AlertContent(title: "Couldn't fetch a fact", message: failure.message, buttons: [.ok])
                       },
                       unwrap: { $0.destination?.alert },
                       embed: { $0.destination = .alert($1) },
                       dismiss: { $0.destination = nil }),
            ],
            // A fetch cut off by a restart is over: no fact, no alert, and no spinner left behind.
            settle: { counter in
                if counter.factIsLoading { counter.factIsLoading = false }
                return nil
            }
        )
    }
}

extension CounterModel.Destination {
    var fact: Fact? {
        if case .fact(let fact) = self { fact } else { nil }
    }

    var settings: SettingsModel? {
        if case .settings(let model) = self { model } else { nil }
    }

    var alert: FactFailure? {
        if case .alert(let failure) = self { failure } else { nil }
    }
}
