/// The session an effect works for, readable by what the effect calls.
///
/// Services shared by every session (the fact client) use it to share fairly: one session must
/// not take all of a service's capacity. A session sets it around each effect it starts; the
/// models and their actions never see it.
public struct EffectOwner: Hashable, Sendable {
    /// Unique while the session lives, and an effect keeps its session alive.
    private let session: ObjectIdentifier

    init(_ session: NavigationSession) {
        self.session = ObjectIdentifier(session)
    }

    /// The session whose effect is running, or `nil` outside one (a test calling a model).
    @TaskLocal public static var current: EffectOwner?
}
