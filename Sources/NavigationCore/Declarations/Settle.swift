/// What a session restored after a restart does about the effects that were running: they did
/// not survive the process. It runs on every feature on screen, and after a deep link too, whose
/// state may say work is under way that nothing runs.
///
/// Work that is over leaves its state as a cancellation would (``lowering(_:)`` a loading flag);
/// work that must go on returns the effect that continues it (a timer re-armed with the time it
/// had left).
public struct Settle<Subject>: Sendable {
    let run: @Sendable (inout Subject) -> Effect?

    /// Settles with `body`, which returns the effect that continues the work, or nil if it is over.
    public init(_ body: @escaping @Sendable (inout Subject) -> Effect?) {
        run = body
    }

    /// The work `flag` shows is over: the flag goes down, as a cancelled fetch would leave it.
    public static func lowering(_ flag: WritableKeyPath<Subject, Bool> & Sendable) -> Settle {
        // Written only when raised, so a settled feature that was idle records no change.
        Settle { subject in
            if subject[keyPath: flag] { subject[keyPath: flag] = false }
            return nil
        }
    }
}
