@testable import NavigationCore
import Observation
import Testing

// Features built to press on kept encodings (`EncodedStates`): a model coded by another screen
// than the one that shows it, a model shared by two elements, an effect's late change, a
// refused transaction undone, and a change Observation never reports.

private final class Box: @unchecked Sendable { var value = 0 }

@Observable private final class Leaf {
    var text = ""
    var hidden = 0
    @ObservationIgnored let box = Box()
    /// Breaks the rule every feature must keep: encoded, yet not observable.
    var boxed: Int {
        get { box.value }
        set { box.value = newValue }
    }

    func later() async {
        await Task.yield()
        text += "!"
    }
}

@Observable private final class Trunk {
    var leaves: [Leaf] = []
}

private let leafScreen = Screen<Leaf>("leaf", make: { Leaf() }) {
    Field("text", \.text, bindable: true)
    Field("boxed", \.boxed)
    Action.sync("bumpBox") { $0.boxed += 1 }
    Action.task("later") { await $0.later() }
}

/// The same model coded with a field its element's screen does not show.
private let leafWithHidden = Screen<Leaf>("leafWithHidden", make: { Leaf() }) {
    Field("text", \.text, bindable: true)
    Field("boxed", \.boxed)
    Field("hidden", \.hidden)
}

private func trunk(_ name: String, coding leaves: Screen<Leaf>) -> Screen<Trunk> {
    Screen(name, make: { Trunk() }) {
        StackSlot.path("leaves", \.leaves, edit: { model, body in body(&model.leaves) }, accepts: [], screens: [leafScreen],
                       codec: leaves.codec, feature: { StackElement($0, leafScreen) })
        Action.sync("hideAll") { for leaf in $0.leaves { leaf.hidden += 1 } }
        Action.sync("pushShared") { $0.leaves.append($0.leaves[0]) }
        Action.sync("pushNew") { $0.leaves.append(Leaf()) }
        Action.sync("pop") { _ = $0.leaves.popLast() }
        Action.sync("editFirst") { $0.leaves[0].text += "e" }
    }
}

@Observable private final class Memo {
    var text = ""
    var hidden = 0
}

@Observable private final class Desk {
    var memo: Memo? = Memo()
    var leaves: [Leaf] = []
}

private let memoSheet = Screen<Memo>("memo", make: { Memo() }) { Field("text", \.text, bindable: true) }
private let memoWithHidden = Screen<Memo>("memoWithHidden", make: { Memo() }) {
    Field("text", \.text)
    Field("hidden", \.hidden)
}

private let desk = Screen<Desk>("desk", make: { Desk() }) {
    PresentationSlot.item("memo", style: .sheet, \.memo, screen: memoSheet, ownerCodec: memoWithHidden.codec)
    StackSlot.path("leaves", \.leaves, edit: { model, body in body(&model.leaves) }, accepts: [], screens: [leafScreen],
                   codec: leafScreen.codec, feature: { StackElement($0, leafScreen) })
    Action.sync("hide") { $0.memo?.hidden += 1 }
    Action.sync("pushNew") { $0.leaves.append(Leaf()) }
    Action.sync("editFirst") { $0.leaves[0].text += "e" }
}

/// A shelf codes its leaves with another screen than the one that shows them, while a sheet of
/// the room shows the same leaf with that other screen: the key is on screen, but elsewhere.
@Observable private final class Shelf { var leaves: [Leaf] = [] }
@Observable private final class Room {
    var shelf: Shelf? = Shelf()
    var focus: Leaf?
    var more: [Leaf] = []
}

private let shelf = Screen<Shelf>("shelf", make: { Shelf() }) {
    StackSlot.path("leaves", \.leaves, edit: { model, body in body(&model.leaves) }, accepts: [], screens: [leafScreen],
                   codec: leafWithHidden.codec, feature: { StackElement($0, leafScreen) })
}

private let room = Screen<Room>("room", make: { Room() }) {
    PresentationSlot.model("shelf", style: .sheet, \.shelf, screen: shelf)
    PresentationSlot.model("focus", style: .sheet, \.focus, screen: leafWithHidden)
    StackSlot.path("more", \.more, edit: { model, body in body(&model.more) }, accepts: [], screens: [leafScreen],
                   codec: leafScreen.codec, feature: { StackElement($0, leafScreen) })
    Action.sync("focusFirst") { $0.focus = $0.shelf?.leaves.first }
    Action.sync("hide") { room in
        if let leaf = room.shelf?.leaves.first { leaf.hidden += 1 }
    }
}

/// A value feature whose screen codes a child model by hand (an `ownerCodec` of its own).
private struct Card { var memo: Memo? = Memo() }
@Observable private final class Holder {
    var card: Card? = Card()
    var leaves: [Leaf] = []
}

private let memoByHand = StateCodec<Memo>(schema: .anyObject, encode: { memo in
    .object(JSONObject([("text", .string(memo.text)), ("hidden", .int(memo.hidden))]))
}) { json, _, existing throws(StateError) in
    let memo = existing ?? Memo()
    if case .string(let text)? = json["text"] { memo.text = text }
    if case .int(let hidden)? = json["hidden"] { memo.hidden = hidden }
    return memo
}

private let card = Screen<Card>("card", make: { Card() }) {
    PresentationSlot.item("memo", style: .sheet, \.memo, screen: memoSheet, ownerCodec: memoByHand)
}

private let holder = Screen<Holder>("holder", make: { Holder() }) {
    PresentationSlot.item("card", style: .sheet, \.card, screen: card, identity: { _ in .presence })
    StackSlot.path("leaves", \.leaves, edit: { model, body in body(&model.leaves) }, accepts: [], screens: [leafScreen],
                   codec: leafScreen.codec, feature: { StackElement($0, leafScreen) })
    Action.sync("hide") { $0.card?.memo?.hidden += 1 }
}

private let catalog = FeatureCatalog(hosting: [.init(trunk("trunk", coding: leafScreen)), .init(trunk("trunkWithHidden", coding: leafWithHidden)),
                                               .init(desk), .init(room), .init(holder)])

@Suite struct EncodedStatesTests {
    private func session(_ feature: String, _ state: String, limits: SessionLimits = SessionLimits()) throws -> NavigationSession {
        try catalog.makeSession(feature: feature, state: try JSONParser.parse(state), limits: limits)
    }

    private static func trunkState(leaves: Int) -> String {
        "{\"leaves\":[" + Array(repeating: "{}", count: leaves).joined(separator: ",") + "]}"
    }

    /// Byte for byte: `JSON ==` compares strings by Unicode equivalence.
    private static func bytes(_ state: JSON?) -> String {
        JSONWriter.string(state ?? .null)
    }

    private static func leafID(_ session: isolated NavigationSession, _ index: Int = 0) -> String {
        session.navigation()["stacks"]?.arrayValue?.first?["elements"]?.arrayValue?[index]["id"]?.stringValue ?? "?"
    }

    /// A model its owner codes otherwise than the node that shows it there: with another screen
    /// (a path's codec, an item's `ownerCodec`, even one a node elsewhere shows it with), or by
    /// hand inside a value. The owner's encoding holds what no node there observes, and is not
    /// kept.
    @Test(arguments: [
        ("trunkWithHidden", trunkState(leaves: 5), ["hideAll"]),
        ("desk", #"{"memo":{},"leaves":[{},{},{},{}]}"#, ["hide"]),
        ("room", #"{"shelf":{"leaves":[{}]},"more":[{},{},{}]}"#, ["focusFirst", "hide"]),
        ("holder", #"{"card":{"memo":{"text":"t","hidden":0}},"leaves":[{},{},{}]}"#, ["hide"]),
    ])
    func aModelCodedOtherwiseIsNeverKeptStale(_ feature: String, _ state: String, _ actions: [String]) async throws {
        let session = try session(feature, state)
        let (kept, fresh) = try await session.run { session throws(NavigationError) in
            for action in actions {
                _ = session.stateEncodedBothWays()
                _ = try session.perform(target: "root", action: action, arguments: nil)
            }
            let both = session.stateEncodedBothWays()
            return (Self.bytes(both.kept), Self.bytes(both.fresh))
        }
        #expect(kept == fresh)
        #expect(fresh.contains(#""hidden":1"#))
    }

    /// The change the shelf's encoding holds is shown by the sheet, so it makes a batch: its
    /// patch carries the change under the shelf too.
    @Test func aDurablePatchCarriesAChangeToAModelCodedOtherwise() async throws {
        let session = try session("room", #"{"shelf":{"leaves":[{}]},"more":[{},{},{}]}"#)
        let journal = MemoryJournal()
        let first = await session.makeDurable(journal: journal)
        _ = try await session.perform(target: "root", action: "focusFirst", arguments: nil)
        _ = try await session.perform(target: "root", action: "hide", arguments: nil)
        for _ in 0..<2500 where await session.pendingWrites > 0 { try await Task.sleep(for: .milliseconds(2)) }
        let stored = try journal.restored(from: first)
        let fresh = await session.stateEncodedBothWays().fresh
        #expect(Self.bytes(fresh).contains(#""leaves":[{"text":"","boxed":0,"hidden":1}]"#))
        #expect(Self.bytes(stored.state) == Self.bytes(fresh))
    }

    /// A model shared by two elements, pops and pushes across the few features encoded afresh,
    /// and an effect's change after its transaction.
    @Test func sharedModelsTheThresholdAndLateEffectsKeepTheEncodingRight() async throws {
        let session = try session("trunk", Self.trunkState(leaves: 4))
        let steps = ["pushShared", "editFirst", "pop", "pop", "pop", "editFirst", "pushNew", "pushShared", "pushShared",
                     "editFirst", "pop", "editFirst", "pushNew", "pushNew", "editFirst"]
        for (index, step) in steps.enumerated() {
            let (kept, fresh, described) = try await session.run { session throws(NavigationError) in
                _ = try session.perform(target: "root", action: step, arguments: nil)
                let both = session.stateEncodedBothWays()
                return (Self.bytes(both.kept), Self.bytes(both.fresh), Self.bytes(session.describe().state))
            }
            #expect(kept == fresh, "step \(index) \(step)")
            #expect(described == fresh, "step \(index) \(step)")
        }
        let outcome = try await session.run { session throws(NavigationError) in
            _ = session.stateEncodedBothWays()
            return try session.perform(target: Self.leafID(session, 1), action: "later", arguments: nil)
        }
        _ = await session.waitForEffects(of: outcome, timeout: .seconds(5))
        let (kept, fresh) = try await session.run { session in
            let both = session.stateEncodedBothWays()
            return (Self.bytes(both.kept), Self.bytes(both.fresh))
        }
        #expect(kept == fresh)
        #expect(fresh.contains("!"))
    }

    /// Near a bound, a refused push is undone from the kept encoding.
    @Test func aRefusedTransactionIsUndoneFromTheKeptEncoding() async throws {
        var limits = SessionLimits()
        limits.maxNodes = 7
        let session = try session("desk", #"{"memo":{},"leaves":[{},{},{},{}]}"#, limits: limits)
        for step in ["editFirst", "pushNew", "editFirst", "pushNew", "editFirst"] {
            let (kept, fresh) = try await session.run { session throws(NavigationError) in
                _ = try? session.perform(target: "root", action: step, arguments: nil)
                let both = session.stateEncodedBothWays()
                return (Self.bytes(both.kept), Self.bytes(both.fresh))
            }
            #expect(kept == fresh, "\(step)")
        }
        let count = try await session.run { session in session.navigation()["stacks"]?.arrayValue?.first?["elements"]?.arrayValue?.count }
        #expect(count == 5, "the push past the bound was refused")
    }

    /// A change Observation never reports (a feature breaking the rule) leaves the kept encoding,
    /// as it leaves the tree, behind; a durable session's next snapshot, encoded afresh, stores it.
    @Test func anUnobservedChangeIsStoredByTheNextSnapshot() async throws {
        let session = try session("trunk", Self.trunkState(leaves: 5))
        let journal = MemoryJournal()
        let first = await session.makeDurable(journal: journal)
        let leaf = try await session.run { session in Self.leafID(session, 1) }
        // A batch first, so that what is kept holds the leaf as it was.
        _ = try await session.perform(target: "root", action: "editFirst", arguments: nil)
        _ = try await session.perform(target: leaf, action: "bumpBox", arguments: nil)
        var snapshotSeen = false
        for _ in 0..<70 where !snapshotSeen {
            _ = try await session.perform(target: "root", action: "editFirst", arguments: nil)
            for _ in 0..<2500 where await session.pendingWrites > 0 { try await Task.sleep(for: .milliseconds(2)) }
            snapshotSeen = journal.entries.last?.snapshot != nil
        }
        #expect(snapshotSeen)
        let stored = try journal.restored(from: first)
        let fresh = await session.stateEncodedBothWays().fresh
        #expect(Self.bytes(stored.state) == Self.bytes(fresh))
        #expect(Self.bytes(fresh).contains(#""boxed":1"#))
    }
}
