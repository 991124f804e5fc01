import Foundation
import NavigationClient
import Testing

/// The tree-apply rules on recorded events: strict, so an event that does not fit throws and
/// leaves the tree as it was.
struct NavigationTreeTests {
    func event(_ type: String, _ data: String) throws -> NavigationEvent {
        try #require(try NavigationEvent(type: type, data: Data(data.utf8)))
    }

    func applying(_ events: [(String, String)]) throws -> NavigationNode? {
        var tree: NavigationNode?
        for (type, data) in events { try NavigationTree.apply(try event(type, data), to: &tree) }
        return tree
    }

    let snapshot = ("snapshot", #"{"version":1,"navigation":{"id":"root","feature":"app","state":{},"presentations":[],"stacks":[{"id":"s1","slot":"path","elements":[]}]}}"#)
    let push = ("push", #"{"stack":"s1","id":"e1","index":0,"feature":"counter","state":{"count":0},"stacks":[]}"#)
    let present = ("present", #"{"id":"p2","parent":"e1","slot":"destination.alert","style":"alert","feature":"alert","state":{},"stacks":[],"alert":{"title":"Oops","message":null,"buttons":[{"id":"ok","label":"OK","role":"cancel"}]}}"#)

    @Test func eventsBuildTypedNodes() throws {
        let tree = try #require(try applying([snapshot, push, present, ("state", #"{"feature":"e1","changes":{"count":3}}"#)]))
        let element = try #require(tree.stacks.first?.elements.first)
        #expect(element.state["count"] == .number(3))
        let alert = try #require(element.presentations.first)
        #expect(alert.style == .alert && alert.alert?.buttons.first?.role == .cancel && alert.alert?.message == nil)
        #expect(try applying([snapshot, push, present, ("dismiss", #"{"id":"p2","origin":"client"}"#),
                              ("pop", #"{"stack":"s1","ids":["e1"],"origin":"client"}"#)]) == applying([snapshot]))
    }

    @Test func anEventThatDoesNotFitChangesNothing() throws {
        var tree = try applying([snapshot, push, present])
        let before = tree
        for (type, data) in [
            ("pop", #"{"stack":"s1","ids":["e1"],"origin":"server"}"#),  // before its alert is dismissed
            ("dismiss", #"{"id":"p9","origin":"server"}"#),
            ("push", #"{"stack":"s1","id":"e3","index":5,"feature":"counter","state":{},"stacks":[]}"#),
            ("push", #"{"stack":"s1","id":"e1","index":1,"feature":"counter","state":{},"stacks":[]}"#),
            ("state", #"{"feature":"e7","changes":{}}"#),
        ] {
            #expect(throws: MirrorError.self) { try NavigationTree.apply(try event(type, data), to: &tree) }
            #expect(tree == before)
        }
        var empty: NavigationNode?
        #expect(throws: MirrorError.self) { try NavigationTree.apply(try event(push.0, push.1), to: &empty) }
    }
}
