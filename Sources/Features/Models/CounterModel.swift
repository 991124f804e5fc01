import Observation

/// A fact about a number, identified by its text: a different fact is a different sheet.
public struct Fact: Equatable, Sendable, Codable {
    public var value: String

    public init(value: String) {
        self.value = value
    }
}

/// Why fetching a fact failed, in words a user can act on.
public struct FactFailure: Equatable, Sendable, Codable {
    public var message: String

    public init(message: String) {
        self.message = message
    }
}

/// A counter that can fetch a fact about its number.
@Observable
public final class CounterModel {
    public var count: Int
    public var factIsLoading = false
    public var destination: Destination?

    /// One destination at a time: changing it dismisses what was shown.
    public enum Destination {
        case fact(Fact)
        case settings(SettingsModel)
        /// The fetch failed; FEATURES.md asks for an alert, and an enum case keeps it exclusive.
        case alert(FactFailure)
    }

    @ObservationIgnored private let factClient: any FactClient
    /// Apart from `factIsLoading`, which a client may overwrite with the rest of the state.
    @ObservationIgnored private var isFetching = false

    public init(count: Int = 0, destination: Destination? = nil, factClient: any FactClient) {
        self.count = count
        self.destination = destination
        self.factClient = factClient
    }

    /// Changing the number dismisses whatever was shown.
    /// Saturates at the ends of `Int`: a deep-linked `Int.max` must not trap the server.
    public func incrementButtonTapped() {
        count = count.addingReportingOverflow(1).overflow ? count : count + 1
        destination = nil
    }

    public func decrementButtonTapped() {
        count = count.subtractingReportingOverflow(1).overflow ? count : count - 1
        destination = nil
    }

    /// A tap while a fetch runs starts no other: the spinner is up, and another fetch would
    /// only take a share of the fact service from other sessions.
    public func factButtonTapped() async {
        guard !isFetching else { return }
        isFetching = true
        factIsLoading = true
        defer {
            isFetching = false
            factIsLoading = false
        }
        do {
            let fact = try await factClient.fact(about: count)
            guard !Task.isCancelled else { return }
            destination = .fact(Fact(value: fact))
        } catch {
            guard !Task.isCancelled else { return }
            destination = .alert(FactFailure(message: error.message))
        }
    }

    public func settingsButtonTapped() {
        destination = .settings(SettingsModel())
    }

    public func dismissFactButtonTapped() {
        destination = nil
    }
}
