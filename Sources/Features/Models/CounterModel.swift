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
    /// The fetch whose answer is awaited, if any. Apart from `factIsLoading`, which a client may
    /// overwrite with the rest of the state; an answer to any other fetch is dropped.
    @ObservationIgnored private var awaitedFetch: Int?
    @ObservationIgnored private var fetchesStarted = 0

    public init(count: Int = 0, destination: Destination? = nil, factClient: any FactClient) {
        self.count = count
        self.destination = destination
        self.factClient = factClient
    }

    /// Changing the number dismisses whatever was shown, the spinner of a fetch on its way too:
    /// its fact is about a number no longer on screen.
    /// Saturates at the ends of `Int`: a deep-linked `Int.max` must not trap the server.
    public func incrementButtonTapped() {
        count = count.addingReportingOverflow(1).overflow ? count : count + 1
        numberChanged()
    }

    public func decrementButtonTapped() {
        count = count.subtractingReportingOverflow(1).overflow ? count : count - 1
        numberChanged()
    }

    private func numberChanged() {
        destination = nil
        if awaitedFetch != nil {
            awaitedFetch = nil
            factIsLoading = false
        }
    }

    /// A tap while the spinner is up starts no other fetch: another would only take a share of
    /// the fact service from other sessions. The fact shown is always about the number on
    /// screen, and comes only while the spinner says one is coming: an answer that arrives after
    /// the number changed (a tap, a deep link) or the spinner was lowered (a deep link) is dropped.
    public func factButtonTapped() async {
        guard !(factIsLoading && awaitedFetch != nil) else { return }
        fetchesStarted += 1
        let (fetch, number) = (fetchesStarted, count)
        awaitedFetch = fetch
        factIsLoading = true
        defer {
            if awaitedFetch == fetch {
                awaitedFetch = nil
                factIsLoading = false
            }
        }
        let answer: Destination
        do {
            answer = .fact(Fact(value: try await factClient.fact(about: number)))
        } catch {
            answer = .alert(FactFailure(message: error.message))
        }
        guard !Task.isCancelled, awaitedFetch == fetch, factIsLoading, count == number else { return }
        destination = answer
    }

    public func settingsButtonTapped() {
        destination = .settings(SettingsModel())
    }

    public func dismissFactButtonTapped() {
        destination = nil
    }
}
