import NavigationCore

/// What models need from outside: the fact service and the delays a client can wait out.
///
/// Passed to models explicitly when they are made, never read from a global, so tests run
/// each session with a stub service and zero delays.
public struct FeatureDependencies: Sendable {
    public var factClient: any FactClient
    /// How long joining a network takes.
    public var connectDelay: Duration
    /// How long the gallery's self-dismissing alert stays up.
    public var alertDismissDelay: Duration
    /// Seconds since 1970: deadlines that must outlive the process (a session is restored
    /// after a restart) are kept in wall-clock time.
    public var wallClock: @Sendable () -> Double

    public init(factClient: any FactClient, connectDelay: Duration = .seconds(1), alertDismissDelay: Duration = .seconds(3),
                wallClock: @escaping @Sendable () -> Double = secondsSince1970) {
        self.factClient = factClient
        self.connectDelay = connectDelay
        self.alertDismissDelay = alertDismissDelay
        self.wallClock = wallClock
    }
}

/// Sleeps unless the work was cancelled (the session ended); `false` means stop.
func pause(for duration: Duration) async -> Bool {
    if duration > .zero {
        do { try await Task.sleep(for: duration) } catch { return false }
    } else {
        await Task.yield()
    }
    return !Task.isCancelled
}
