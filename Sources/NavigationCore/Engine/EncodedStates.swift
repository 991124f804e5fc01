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
/// part of its owner's), under the model and the screen that encodes it, and only where that
/// node is shown; an encoding that holds a model encoded otherwise (by another screen, a codec
/// written by hand, or in a place no node shows it) is not kept.
///
/// It rests on the rule every feature keeps anyway for its tree to be right: what a screen
/// encodes is observable state, and values that are equal encode alike. A change Observation
/// does not report (an `@ObservationIgnored` property, a value set to one that is `==` yet
/// encodes otherwise) leaves the tree behind as well; a durable snapshot, encoded afresh every
/// so often, bounds how long the stored state can be behind with it.
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
    /// For each node, the nearest node above it that has a key (nil for none): where its
    /// encoding belongs. A node showing the same model elsewhere observes it for its own
    /// owners, not for this place.
    private var enclosing: [Int: Int] = [:]
    /// The node whose encoding is being made; nil outside any.
    private var encodingSerial: Int?
    /// Set while an encoding met what no node there observes: what holds it may change unseen,
    /// so no encoding around it is kept.
    private var metUnobserved = false

    func register(_ key: Key, serial: Int, enclosing owner: Int?) {
        serials[key] = serial
        enclosing[serial] = owner
    }

    /// An encoding met what no node there observes (a value screen coding children by hand).
    func noteUnobserved() { metUnobserved = true }

    func remove(_ key: Key, serial: Int) {
        if serials[key] == serial { serials[key] = nil }
        encoded[serial] = nil
        enclosing[serial] = nil
    }

    func forget(_ serial: Int) {
        encoded[serial] = nil
    }

    func forgetAll() {
        if !encoded.isEmpty { encoded.removeAll() }
    }

    /// `encode`, run with these states kept: the session's whole state, say.
    func keeping(_ encode: () -> JSON?) -> JSON? {
        metUnobserved = false
        encodingSerial = nil
        return Self.$current.withValue(self) { encode() }
    }

    /// The kept encoding of `key`'s node, or `encode`'s, kept when the key is the node's shown
    /// right here (under the node being encoded) and nothing in it is unobserved. A model no
    /// node shows here under this screen (another screen codes it, or a node elsewhere shows
    /// it), or a screen that codes its children by hand (`canBeKept` false), may change unseen:
    /// then neither it nor what holds it is kept.
    func encoding(_ key: Key, canBeKept: Bool, _ encode: () -> JSON) -> JSON {
        guard canBeKept, let serial = serials[key], enclosing[serial] == encodingSerial else {
            metUnobserved = true
            return encode()
        }
        if let kept = encoded[serial] { return kept }
        let metBefore = metUnobserved
        let outer = encodingSerial
        metUnobserved = false
        encodingSerial = serial
        let fresh = encode()
        encodingSerial = outer
        if !metUnobserved { encoded[serial] = fresh }
        metUnobserved = metUnobserved || metBefore
        return fresh
    }
}
