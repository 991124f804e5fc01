import NavigationCore

extension Screen where Subject == Network {
    /// A network as it appears in state; a record, never presented on its own. Its fields are
    /// its `Codable` keys; only the signal strength's range needs saying.
    static var network: Screen<Network> {
        .value("Network", refining: [.value("connectivity", \.connectivity, .double(in: 0...1))]) {
            Network(id: "", name: "", isSecured: false, connectivity: 0)
        }
    }
}

extension Screen where Subject == WifiModel {
    /// Joining is a sheet, a network's details a drill-down.
    static func wifi(
        _ dependencies: FeatureDependencies,
        connect: Screen<ConnectToNetworkModel>,
        detail: Screen<NetworkDetailModel>
    ) -> Screen<WifiModel> {
        let destination = DestinationField<WifiModel, WifiModel.Destination>("destination", \.destination, [
            .model("connect", style: .sheet, connect,
                   embed: { .connect($0) }, extract: { if case .connect(let model) = $0 { model } else { nil } }),
            .model("detail", style: .drillDown, detail,
                   embed: { .detail($0) }, extract: { if case .detail(let model) = $0 { model } else { nil } }),
        ])
        return Screen("wifi", make: { WifiModel(dependencies: dependencies) },
            // `isOn` last: turning Wi-Fi off clears the selection and the destination, so a deep
            // link that says "off" ends up with neither, whatever order its keys come in.
            fields: [
                .value("foundNetworks", \.foundNetworks, .array(Screen<Network>.network.codec)),
                .value("selectedNetworkID", \.selectedNetworkID, .optional(.string)),
                destination.field,
                .value("isOn", \.isOn, .bool, bindable: true),
            ],
            actions: [
                .sync("networkTapped", [.string("network")]) { model, arguments throws(StateError) in
                    model.networkTapped(try model.foundNetwork(arguments))
                },
                .sync("infoButtonTapped", [.string("network")]) { model, arguments throws(StateError) in
                    model.infoButtonTapped(try model.foundNetwork(arguments))
                },
                .sync("refreshNetworks") { $0.refreshNetworks() },
            ],
            presentations: destination.slots
        )
    }
}

extension Screen where Subject == NetworkDetailModel {
    static func detail(alert: Screen<Presence>) -> Screen<NetworkDetailModel> {
        let confirmForget = Action<NetworkDetailModel>.sync("confirmForgetNetworkButtonTapped") { $0.confirmForgetNetworkButtonTapped() }
        return Screen("detail", make: { NetworkDetailModel(network: Screen<Network>.network.make()) },
            fields: [
                .value("network", \.network, Screen<Network>.network.codec),
                .value("forgetAlertIsPresented", \.forgetAlertIsPresented, .bool),
            ],
            actions: [
                .sync("forgetNetworkButtonTapped") { $0.forgetNetworkButtonTapped() },
                confirmForget,
            ],
            presentations: [
                .isPresented("forgetAlertIsPresented", style: .alert, \.forgetAlertIsPresented, screen: alert) { model in
                    AlertContent(title: "Forget Wi-Fi Network \"\(model.network.name)\"?", buttons: [
                        .cancel,
                        AlertButton("Forget", role: .destructive, action: confirmForget),
                    ])
                },
            ]
        )
    }
}

extension Screen where Subject == ConnectToNetworkModel {
    static func connect(_ dependencies: FeatureDependencies, alert: Screen<Presence>) -> Screen<ConnectToNetworkModel> {
        Screen("connect",
            make: { ConnectToNetworkModel(network: Screen<Network>.network.make(), delay: dependencies.connectDelay) },
            fields: [
                .value("network", \.network, Screen<Network>.network.codec),
                .value("password", \.password, .string, bindable: true),
                .value("isConnecting", \.isConnecting, .bool),
                .value("incorrectPasswordAlertIsPresented", \.incorrectPasswordAlertIsPresented, .bool),
            ],
            actions: [
                .task("joinButtonTapped") { await $0.joinButtonTapped() },
            ],
            presentations: [
                .isPresented("incorrectPasswordAlertIsPresented", style: .alert, \.incorrectPasswordAlertIsPresented, screen: alert) { model in
                    AlertContent(title: "Incorrect password for \"\(model.network.name)\"", buttons: [.ok])
                },
            ],
            // A join cut off by a restart is over: the sheet stays, ready to try again.
            settle: { detail in
                if detail.isConnecting { detail.isConnecting = false }
                return nil
            }
        )
    }
}

extension WifiModel {
    /// The network an action names, which must be one that was found.
    fileprivate func foundNetwork(_ arguments: Arguments) throws(StateError) -> Network {
        let id = try arguments.string("network")
        guard let network = foundNetworks.first(where: { $0.id == id }) else {
            throw StateError(arguments.path("network"), "no network with id \"\(id)\" was found")
        }
        return network
    }
}
