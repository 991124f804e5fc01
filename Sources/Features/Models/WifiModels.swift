import Observation

public struct Network: Identifiable, Equatable, Sendable, Codable {
    public var id: String
    public var name: String
    public var isSecured: Bool
    /// Signal strength, 0...1.
    public var connectivity: Double

    public init(id: String, name: String, isSecured: Bool, connectivity: Double) {
        self.id = id
        self.name = name
        self.isSecured = isSecured
        self.connectivity = connectivity
    }

    /// What a fresh session finds: a fixed list with secured and open networks.
    public static let seeded: [Network] = [
        Network(id: "n1", name: "Blob's Home", isSecured: true, connectivity: 1),
        Network(id: "n2", name: "Blob Café", isSecured: false, connectivity: 0.75),
        Network(id: "n3", name: "Point-Free HQ", isSecured: true, connectivity: 0.5),
        Network(id: "n4", name: "Airport Free Wi-Fi", isSecured: false, connectivity: 0.25),
        Network(id: "n5", name: "Neighbor", isSecured: true, connectivity: 0.1),
    ]
}

/// Wi-Fi settings: a list of networks, a sheet to join a secured one, a drill-down for details.
@Observable
public final class WifiModel {
    public var foundNetworks: [Network]
    /// Turning Wi-Fi off forgets the selection and dismisses whatever was shown.
    public var isOn: Bool {
        didSet {
            guard !isOn else { return }
            selectedNetworkID = nil
            destination = nil
        }
    }
    public var selectedNetworkID: String?
    public var destination: Destination? {
        didSet { bindDestination() }
    }

    public enum Destination {
        case connect(ConnectToNetworkModel)
        case detail(NetworkDetailModel)
    }

    @ObservationIgnored private let dependencies: FeatureDependencies

    public init(
        foundNetworks: [Network] = Network.seeded,
        isOn: Bool = true,
        selectedNetworkID: String? = nil,
        destination: Destination? = nil,
        dependencies: FeatureDependencies
    ) {
        self.foundNetworks = foundNetworks
        self.isOn = isOn
        self.selectedNetworkID = selectedNetworkID
        self.destination = destination
        self.dependencies = dependencies
        bindDestination()
    }

    /// While Wi-Fi is off there is no list to tap: off always means no selection and nothing shown.
    public func networkTapped(_ network: Network) {
        guard isOn else { return }
        if network.id == selectedNetworkID {
            destination = .detail(NetworkDetailModel(network: network))
        } else if network.isSecured {
            destination = .connect(ConnectToNetworkModel(network: network, delay: dependencies.connectDelay))
        } else {
            selectedNetworkID = network.id
        }
    }

    public func infoButtonTapped(_ network: Network) {
        guard isOn else { return }
        destination = .detail(NetworkDetailModel(network: network))
    }

    /// A new scan: signal strengths change and one open network comes and goes. What is presented
    /// stays unless its network disappeared.
    public func refreshNetworks() {
        // The scan after the one on screen, told by the list itself: a count of scans kept beside
        // the state would start again in a model made from state (a deep link, a restart), and
        // its next scan would differ from the one a session that went on would make.
        let current = (1...Self.scanCycle).first { Self.scan($0) == foundNetworks } ?? 0
        foundNetworks = Self.scan(current % Self.scanCycle + 1)
        let ids = Set(foundNetworks.map(\.id))
        if let selectedNetworkID, !ids.contains(selectedNetworkID) { self.selectedNetworkID = nil }
        if let shown = destination?.network, !ids.contains(shown.id) { destination = nil }
    }

    /// Scans repeat after this many: the open network's presence alternates, strengths cycle by 5.
    private static let scanCycle = 10

    /// The list scan number `scan` finds.
    private static func scan(_ scan: Int) -> [Network] {
        Network.seeded.enumerated().compactMap { index, network in
            if network.id == "n4", scan % 2 == 1 { return nil }
            var network = network
            network.connectivity = Double((index * 3 + scan) % 5) / 4
            return network
        }
    }

    /// Children tell the parent what happened; a child that is no longer shown (the user swiped
    /// the sheet away while it was joining) changes nothing.
    private func bindDestination() {
        switch destination {
        case .connect(let model):
            model.onConnect = { [weak self, weak model] network in
                guard let self, case .connect(let shown)? = destination, shown === model else { return }
                selectedNetworkID = network.id
                destination = nil
            }
        case .detail(let model):
            model.onConfirmForget = { [weak self, weak model] in
                guard let self, let model, case .detail(let shown)? = destination, shown === model else { return }
                // FEATURES.md: forgetting a network clears the selection, whichever network it was.
                selectedNetworkID = nil
                destination = nil
            }
        case nil:
            break
        }
    }
}

extension WifiModel.Destination {
    var network: Network {
        switch self {
        case .connect(let model): model.network
        case .detail(let model): model.network
        }
    }
}

/// The details of one network, with a confirmation before forgetting it.
@Observable
public final class NetworkDetailModel {
    public var network: Network
    public var forgetAlertIsPresented: Bool
    /// Tells the parent, which owns the selection.
    @ObservationIgnored var onConfirmForget: () -> Void = {}

    public init(network: Network, forgetAlertIsPresented: Bool = false) {
        self.network = network
        self.forgetAlertIsPresented = forgetAlertIsPresented
    }

    public func forgetNetworkButtonTapped() {
        forgetAlertIsPresented = true
    }

    public func confirmForgetNetworkButtonTapped() {
        forgetAlertIsPresented = false
        onConfirmForget()
    }
}

/// Joining a secured network: a password field and an alert when the password is wrong.
@Observable
public final class ConnectToNetworkModel {
    public var network: Network
    public var password: String
    public var isConnecting = false
    public var incorrectPasswordAlertIsPresented = false
    /// Tells the parent, which selects the network and dismisses this sheet.
    @ObservationIgnored var onConnect: (Network) -> Void = { _ in }
    @ObservationIgnored private let delay: Duration

    public init(network: Network, password: String = "", delay: Duration) {
        self.network = network
        self.password = password
        self.delay = delay
    }

    /// A tap while a join is under way does nothing, as a disabled button would: the join
    /// under way reads the password when it finishes, and a second timer would only lower the
    /// spinner early and hold a task per tap.
    public func joinButtonTapped() async {
        guard !isConnecting else { return }
        isConnecting = true
        defer { isConnecting = false }
        guard await pause(for: delay) else { return }
        if password == "blob" {
            onConnect(network)
        } else {
            incorrectPasswordAlertIsPresented = true
        }
    }
}
