/// The features a server can host, and how to start a session on each.
public struct FeatureCatalog: Sendable {
    /// A feature a session can have at its root.
    public struct Host: Sendable {
        /// The feature's name, as `POST /sessions` names it.
        public let name: String
        /// Its screen, where a walk of the declarations starts.
        public let screen: any DescribableScreen
        let makeRoot: @Sendable (JSON?) throws(StateError) -> any AnyLiveFeature

        /// A feature sessions can start with, shown by `screen`.
        public init<Model: AnyObject>(_ screen: Screen<Model>) {
            name = screen.name
            self.screen = screen
            makeRoot = { state throws(StateError) in
                let model = try state.map { json throws(StateError) in try screen.decode(json, at: JSONPath("state"), into: nil) }
                    ?? screen.make()
                return LiveFeature(screen, access: .model(model))
            }
        }
    }

    /// The features a session can have at its root.
    public let hosts: [Host]
    /// Every screen that can appear, hostable or only ever presented, found by walking the
    /// declarations from the hosts: what `GET /features` lists and the contract describes.
    public let screens: [any DescribableScreen]
    /// `GET /features`: every screen that can appear, hostable or only ever presented.
    public let description: JSON

    /// The description is derived by walking the declarations from the hostable roots, so a
    /// screen can never be left out of it.
    ///
    /// A name is a screen's identity on the wire (`GET /features`, a node's `feature`, the
    /// contract's `<Name>State`): two screens that share one must be one declaration, or two
    /// that describe alike. Others would leave one of them undescribed, so they stop the
    /// catalog being built, as two fields of one name stop a screen.
    public init(hosting hosts: [Host]) {
        self.hosts = hosts
        let hostNames = Set(hosts.map(\.name))
        var seen: [String: any DescribableScreen] = [:]
        var screens: [any DescribableScreen] = []
        var pending = hosts.map(\.screen)
        while !pending.isEmpty {
            let screen = pending.removeFirst()
            if let earlier = seen[screen.name] {
                // Described only when two declarations meet: a screen met again is most often the same one.
                guard earlier as AnyObject === screen as AnyObject || earlier.describe(hostable: false) == screen.describe(hostable: false) else {
                    preconditionFailure("two different screens are named \"\(screen.name)\": give each its own name")
                }
                continue
            }
            seen[screen.name] = screen
            screens.append(screen)
            pending += screen.children
        }
        self.screens = screens
        description = .object(JSONObject([("features", .array(screens.map { $0.describe(hostable: hostNames.contains($0.name)) }))]))
    }

    /// A new session, optionally deep-linked by a full or partial initial state, running on
    /// `executor` (a serial queue of its own by default). A deep link starts no work, so what its
    /// state says is under way that nothing runs is settled as the session is made (a loading
    /// flag lowered, as by `replaceState`): it starts at version 0 as it stays. What settling
    /// continues (a timer with the time it had left) starts with
    /// `NavigationSession.startSettledWork()`, which navd calls once the session is hosted.
    public func makeSession(feature: String, state: JSON?, limits: SessionLimits = SessionLimits(),
                            executor: any SessionExecutor = SerialQueueExecutor()) throws(NavigationError) -> NavigationSession {
        guard let host = hosts.first(where: { $0.name == feature }) else {
            throw screens.contains { $0.name == feature } ? .notHostable(feature) : .unknownFeature(feature)
        }
        if let state {
            do throws(StateError) { try limits.check(state, at: JSONPath("state")) } catch { throw .tooLarge(error) }
        }
        let root: any AnyLiveFeature
        do {
            root = try host.makeRoot(state)
        } catch {
            throw .invalidState(error)
        }
        return try NavigationSession(feature: feature, root: root, deepLinked: state != nil, limits: limits, executor: executor,
                                     rebuild: rebuilder(host))
    }

    /// A session brought back from its journal, with the same tree, ids, counters and kept events:
    /// its last snapshot with the entries written since replayed onto it.
    public func restoreSession(feature: String, _ snapshot: DurableSession, replaying entries: [JournalEntry] = [],
                               events: [NavigationEvent], limits: SessionLimits = SessionLimits(), journal: any SessionJournal,
                               executor: any SessionExecutor = SerialQueueExecutor()) throws(RecoveryError) -> NavigationSession {
        guard let host = hosts.first(where: { $0.name == feature }) else { throw RecoveryError(description: "unknown feature \(feature)") }
        return try NavigationSession(feature: feature, restoring: snapshot, replaying: entries, events: events, limits: limits,
                                     journal: journal, executor: executor, rebuild: rebuilder(host))
    }

    private func rebuilder(_ host: Host) -> @Sendable (JSON) throws(StateError) -> any AnyLiveFeature {
        let makeRoot = host.makeRoot
        return { state throws(StateError) in try makeRoot(state) }
    }
}

/// A screen that can describe itself for `GET /features`, whatever its subject.
public protocol DescribableScreen: Sendable {
    /// The feature's name.
    var name: String { get }
    /// The screens this one can present or push.
    var children: [any DescribableScreen] { get }
    /// Its state's fields in order, with what their values look like and whether they hold
    /// child features (shown as nodes, not in a node's `state`), for a typed contract.
    var stateFields: [(name: String, schema: StateSchema, holdsChildren: Bool)] { get }
    /// Its entry in `GET /features`.
    func describe(hostable: Bool) -> JSON
}

extension Screen: DescribableScreen {
    public var children: [any DescribableScreen] {
        body.presentations.map(\.screen) + body.stacks.flatMap(\.screens)
    }

    public var stateFields: [(name: String, schema: StateSchema, holdsChildren: Bool)] {
        body.fields.map { ($0.name, $0.schema, $0.holdsChildren) }
    }

    public func describe(hostable: Bool) -> JSON {
        .object(JSONObject([
            ("name", .string(name)),
            ("hostable", .bool(hostable)),
            ("state", .array(body.fields.map { field in
                .object(JSONObject([
                    ("name", .string(field.name)), ("type", .string(field.typeName)),
                    ("bindable", .bool(field.isBindable)), ("children", .bool(field.holdsChildren)),
                ]))
            })),
            ("actions", .array(body.actions.map { action in
                .object(JSONObject([
                    ("name", .string(action.name)),
                    ("arguments", .array(action.parameters.map { parameter in
                        .object(JSONObject([("name", .string(parameter.name)), ("type", .string(parameter.typeName))]))
                    })),
                ]))
            })),
            ("bindings", .array(body.fields.filter(\.isBindable).map { .string($0.name) })),
            ("presentations", .array(body.presentations.map { slot in
                var object = JSONObject([("slot", .string(slot.name)), ("style", .string(slot.style.rawValue)), ("feature", .string(slot.feature))])
                if let anchor = slot.anchor { object.append("anchor", .string(anchor)) }
                return .object(object)
            })),
            ("stacks", .array(body.stacks.map { stack in
                .object(JSONObject([("slot", .string(stack.name)), ("accepts", .array(stack.accepts.map(JSON.string)))]))
            })),
        ]))
    }
}
