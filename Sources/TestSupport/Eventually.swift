/// Waits until `condition` holds, checking every 20 ms for at most `limit`; `false` if it never did.
/// For what a test can only observe from outside, such as a stub's open connections.
public func eventually(within limit: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        do { try await Task.sleep(for: .milliseconds(20)) } catch { return condition() }
    }
    return true
}
