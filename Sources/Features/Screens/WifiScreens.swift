import NavigationCore

/// A network as it appears in state; a record, never presented on its own. Its fields are its
/// `Codable` keys; only the signal strength's range needs saying.
private let network = Screen<Network>.value("Network", refining: [Field("connectivity", \.connectivity, .double(in: 0...1))]) {
    Network(id: "", name: "", isSecured: false, connectivity: 0)
}

extension Screen where Subject == WifiModel {
    /// Joining is a sheet, a network's details a drill-down.
    static func wifi(_ dependencies: FeatureDependencies) -> Screen<WifiModel> {
        Screen("wifi", make: { WifiModel(dependencies: dependencies) }) {
            Field("foundNetworks", \.foundNetworks, .array(network.codec))
            Field("selectedNetworkID", \.selectedNetworkID)
            DestinationField("destination", \.destination, [
                .model("connect", style: .sheet, .connect(dependencies),
                       embed: { .connect($0) }, extract: { if case .connect(let model) = $0 { model } else { nil } }),
                .model("detail", style: .drillDown, .detail(),
                       embed: { .detail($0) }, extract: { if case .detail(let model) = $0 { model } else { nil } }),
            ])
            // `isOn` last: turning Wi-Fi off clears the selection and the destination, so a deep
            // link that says "off" ends up with neither, whatever order its keys come in.
            Field("isOn", \.isOn, bindable: true)
            Action.sync("networkTapped", .element("network", in: \.foundNetworks, id: \.id)) { $0.networkTapped($1) }
            Action.sync("infoButtonTapped", .element("network", in: \.foundNetworks, id: \.id)) { $0.infoButtonTapped($1) }
            Action.sync("refreshNetworks") { $0.refreshNetworks() }
        }
    }
}

extension Screen where Subject == NetworkDetailModel {
    static func detail() -> Screen<NetworkDetailModel> {
        let confirmForget = Action<NetworkDetailModel>.sync("confirmForgetNetworkButtonTapped") { $0.confirmForgetNetworkButtonTapped() }
        return Screen("detail", make: { NetworkDetailModel(network: network.make()) }) {
            Field("network", \.network, network.codec)
            PresentationSlot.isPresented("forgetAlertIsPresented", style: .alert, \.forgetAlertIsPresented, screen: .alert) { model in
                AlertContent(title: "Forget Wi-Fi Network \"\(model.network.name)\"?",
                             buttons: [.cancel, AlertButton("Forget", role: .destructive, action: confirmForget)])
            }
            Action.sync("forgetNetworkButtonTapped") { $0.forgetNetworkButtonTapped() }
            confirmForget
        }
    }
}

extension Screen where Subject == ConnectToNetworkModel {
    static func connect(_ dependencies: FeatureDependencies) -> Screen<ConnectToNetworkModel> {
        Screen("connect", make: { ConnectToNetworkModel(network: network.make(), delay: dependencies.connectDelay) }) {
            Field("network", \.network, network.codec)
            Field("password", \.password, bindable: true)
            Field("isConnecting", \.isConnecting)
            PresentationSlot.isPresented("incorrectPasswordAlertIsPresented", style: .alert, \.incorrectPasswordAlertIsPresented,
                                         screen: .alert) { model in
                AlertContent(title: "Incorrect password for \"\(model.network.name)\"", buttons: [.ok])
            }
            Action.task("joinButtonTapped") { await $0.joinButtonTapped() }
            // A join cut off by a restart is over: the sheet stays, ready to try again.
            Settle.lowering(\.isConnecting)
        }
    }
}
