/// The encoded state of each feature on screen that shows a model, kept from one encoding of the
/// session's state to the next, so that encoding it again costs what changed, not what it holds.
///
/// A session encodes its whole state for every durable batch (the base of the next patch) and,
/// near a bound, before every transaction (what a refused one goes back to). A path of a thousand
/// elements encoded afresh each time made one action cost milliseconds.
///
/// What makes a kept encoding safe to reuse is the reconciler's observation: a node's derivation
/// reads everything its screen encodes except the state of the models it shows as children,
/// which their own nodes observe. So a change marks the node that observed it, and forgetting
/// that node's encoding and every ancestor's (whose encodings contain it) is enough. Only
/// features whose model stays the same object for the node's life are kept (a value's state is
/// part of its owner's), under the model and the screen that encodes it.
///
/// Confined to the session's executor: the reconciler owns it, and `Screen.encode` reads it
/// through a task-local only while the reconciler encodes.
final class EncodedStates: @unchecked Sendable {
    struct Key: Hashable {
        let model: ObjectIdentifier
        let screen: ObjectIdentifier

        init(model: AnyObject, screen: AnyObject) {
            self.model = ObjectIdentifier(model)
            self.screen = ObjectIdentifier(screen)
        }
    }

    /// The states kept while an encoding runs; nil otherwise, when every encoding is fresh.
    @TaskLocal static var current: EncodedStates?

    /// The node each key belongs to while it is on screen: the node holds the model, so its
    /// identifier cannot be reused meanwhile.
    private var serials: [Key: Int] = [:]
    private var encoded: [Int: JSON] = [:]

    func register(_ key: Key, serial: Int) {
        serials[key] = serial
    }

    func remove(_ key: Key, serial: Int) {
        if serials[key] == serial { serials[key] = nil }
        encoded[serial] = nil
    }

    func forget(_ serial: Int) {
        encoded[serial] = nil
    }

    func forgetAll() {
        if !encoded.isEmpty { encoded.removeAll() }
    }

    /// The kept encoding of `key`'s node, or `encode`'s, kept when the key is on screen.
    func encoding(_ key: Key, _ encode: () -> JSON) -> JSON {
        guard let serial = serials[key] else { return encode() }
        if let kept = encoded[serial] { return kept }
        let fresh = encode()
        encoded[serial] = fresh
        return fresh
    }
}
