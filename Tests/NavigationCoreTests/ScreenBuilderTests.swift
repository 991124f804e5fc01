@testable import NavigationCore
import Observation
import Testing

private struct Book: Codable, Equatable, Sendable {
    var id: String
    var title: String
}

private struct Label: Codable, Equatable, Sendable {
    var text: String
}

@Observable private final class Note {
    var text = ""
}

@Observable private final class Loader {
    var loaded: [String] = []
    var isLoading = false

    func load(_ book: Book) async {
        isLoading = true
        await Task.yield()
        loaded.append(book.id)
        isLoading = false
    }
}

@Observable private final class Shelf {
    var books: [Book] = []
    var label = ""
    var isHelpShown = false
    var picked: Book?
    var isBusy = false
    var note: Note?
    var draft: String?
}

/// A screen declared in a `ScreenBuilder` block: the order of its state is the order of the block,
/// a slot declares the field that drives it, an element argument resolves before its action
/// runs, and `Settle.lowering` lowers only a raised flag.
@Suite struct ScreenBuilderTests {
    private static let book = Screen<Book>.value("book") { Book(id: "", title: "") }

    private static func shelf(withHelp: Bool = true) -> Screen<Shelf> {
        Screen("shelf", make: { Shelf() }) {
            Field("books", \.books, .array(book.codec))
            for name in ["label"] {
                Field(name, \.label, bindable: true)
            }
            if withHelp {
                PresentationSlot.isPresented("isHelpShown", style: .sheet, \.isHelpShown, screen: Screen("help", make: { Presence() }),
                                             bindable: true)
            }
            PresentationSlot.item("picked", style: .sheet, \.picked, screen: book)
            Field("isBusy", \.isBusy)
            PresentationSlot.item("note", style: .sheet, \.note, screen: Screen("note", make: { Note() }) {
                Field("text", \.text, bindable: true)
            })
            // A sheet that edits the very text it unwraps, with no identity declared.
            PresentationSlot.item("draft", style: .sheet, \.draft, screen: Screen<String>("draftEditor", make: { "" }) {
                Field("text", \.self, bindable: true)
            }, ownerCodec: .string)
            Action.sync("bookTapped", .element("book", in: \.books, id: \.id)) { $0.picked = $1 }
            Action.sync("busy") { $0.isBusy = true }
            Settle.lowering(\.isBusy)
        }
    }

    private func session(_ state: String) throws -> NavigationSession {
        try FeatureCatalog(hosting: [.init(Self.shelf())]).makeSession(feature: "shelf", state: try JSONParser.parse(state))
    }

    @Test func theStateFollowsTheBlockAndEachSlotDeclaresItsField() {
        let body = Self.shelf().body
        #expect(body.fields.map(\.name) == ["books", "label", "isHelpShown", "picked", "isBusy", "note", "draft"])
        #expect(body.fields.filter(\.isBindable).map(\.name) == ["label", "isHelpShown"])
        #expect(body.fields.filter(\.holdsChildren).map(\.name) == ["picked", "note", "draft"], "a Bool's field is the feature's own state")
        #expect(body.presentations.map(\.name) == ["isHelpShown", "picked", "note", "draft"])
        #expect(body.actions.map(\.name) == ["bookTapped", "busy"])
        #expect(Self.shelf(withHelp: false).body.fields.map(\.name) == ["books", "label", "picked", "isBusy", "note", "draft"])
    }

    @Test func anElementArgumentHandsTheActionTheElementItNames() async throws {
        let session = try session(#"{"books":[{"id":"a","title":"A"},{"id":"b","title":"B"}]}"#)
        let picked = try await session.run { session throws(NavigationError) in
            _ = try session.perform(target: "root", action: "bookTapped", arguments: try? JSONParser.parse(#"{"book":"b"}"#))
            return session.describe().state["picked"]
        }
        #expect(picked == (try JSONParser.parse(#"{"id":"b","title":"B"}"#)))
    }

    @Test func anElementArgumentThatNamesNothingIsRefusedAndChangesNothing() async throws {
        let session = try session(#"{"books":[{"id":"a","title":"A"}]}"#)
        let (error, version) = try await session.run { session throws(NavigationError) in
            var error: NavigationError?
            do throws(NavigationError) {
                _ = try session.perform(target: "root", action: "bookTapped", arguments: try? JSONParser.parse(#"{"book":"zz"}"#))
            } catch let refused {
                error = refused
            }
            return (error, session.describe().version)
        }
        #expect(error == .invalidArgument(StateError(JSONPath("args").appending("book"), #"no book with id "zz" was found"#)))
        #expect(version == 0)
    }

    private static func presentation(_ slot: String, _ session: isolated NavigationSession) -> String? {
        session.navigation()["presentations"]?.arrayValue?.first { $0["slot"]?.stringValue == slot }?["id"]?.stringValue
    }

    /// Rule 1 for a value without a declared identity: its `id` when it has one. The same book
    /// stays the same presentation, retitled or not; another book is another presentation.
    @Test func aValueItemIsKeyedByItsIDWhenItDeclaresNoIdentity() async throws {
        let session = try session(#"{"books":[{"id":"a","title":"A"},{"id":"b","title":"B"}]}"#)
        let retitled = try JSONParser.parse(#"{"books":[{"id":"b","title":"B"}],"picked":{"id":"b","title":"Retitled"}}"#)
        let ids = try await session.run { session throws(NavigationError) in
            var ids: [String?] = []
            for book in ["a", "a", "b"] {
                _ = try session.perform(target: "root", action: "bookTapped", arguments: try? JSONParser.parse(#"{"book":"\#(book)"}"#))
                ids.append(Self.presentation("picked", session))
            }
            _ = try session.replaceState(retitled)
            ids.append(Self.presentation("picked", session))
            return ids
        }
        #expect(ids[0] != nil)
        #expect(ids[1] == ids[0])
        #expect(ids[2] != nil && ids[2] != ids[0])
        #expect(ids[3] == ids[2], "a changed title with the same id is the same presentation")
    }

    /// A value without an `id` is keyed by all of itself; a model by its object, so typing into a
    /// presented model's binding never dismisses and re-presents it.
    @Test func withoutAnIDAValueIsItselfAndAModelIsItsObject() async throws {
        let identity = Screen<Label>.value("label") { Label(text: "") }.defaultIdentity
        #expect(identity(Label(text: "a")) == identity(Label(text: "a")))
        #expect(identity(Label(text: "a")) != identity(Label(text: "b")))
        let session = try session(#"{"note":{"text":""}}"#)
        let (before, after) = try await session.run { session throws(NavigationError) in
            let before = Self.presentation("note", session)
            _ = try session.bind(target: before ?? "?", field: "text", value: .string("h"))
            return (before, Self.presentation("note", session))
        }
        #expect(before != nil)
        #expect(after == before)
    }

    /// Rule 1's last case with nothing declared: a value whose sheet edits it through a binding
    /// (a text "unwrapped" into an editor) is keyed by presence, so every keystroke is a `state`
    /// event of the same sheet, never a dismissal and a new presentation.
    @Test func aValueSheetThatEditsWhatItUnwrapsIsKeyedByPresence() async throws {
        let session = try session(#"{"draft":"a"}"#)
        let (before, kinds, after) = try await session.run { session throws(NavigationError) in
            let before = Self.presentation("draft", session)
            var kinds: [String] = []
            for text in ["ab", "abc"] {
                kinds += try session.bind(target: before ?? "?", field: "text", value: .string(text)).events.map(\.kind.rawValue)
            }
            return (before, kinds, Self.presentation("draft", session))
        }
        #expect(before != nil)
        #expect(after == before)
        #expect(kinds == ["state", "state"])
        // Its owner's state holds the edited text.
        let state = await session.describe().state
        #expect(state["draft"] == .string("abc"))
    }

    /// A value with an `id` is keyed by it even when its sheet binds a field: an edit never
    /// changes the id, and another value in the slot (another contact) is another presentation.
    @Test func anIdentifiedValueEditedThroughABindingIsStillKeyedByItsID() async throws {
        let editor = Screen<Book>("bookEditor", make: { Book(id: "", title: "") }) {
            Field("id", \.id)
            Field("title", \.title, bindable: true)
        }
        let screen = Screen<Shelf>("editingShelf", make: { Shelf() }) {
            PresentationSlot.item("picked", style: .sheet, \.picked, screen: editor)
            Action.sync("pickOther") { $0.picked = Book(id: "b", title: "B") }
        }
        let session = try FeatureCatalog(hosting: [.init(screen)])
            .makeSession(feature: "editingShelf", state: try JSONParser.parse(#"{"picked":{"id":"a","title":"A"}}"#))
        let (typed, other) = try await session.run { session throws(NavigationError) in
            let sheet = Self.presentation("picked", session) ?? "?"
            let typed = try session.bind(target: sheet, field: "title", value: .string("Ab")).events.map(\.kind.rawValue)
            return (typed, try session.perform(target: "root", action: "pickOther", arguments: nil).events.map(\.kind.rawValue))
        }
        #expect(typed == ["state"])
        #expect(other == ["dismiss", "present"])
    }

    /// An alert button's id is what clients send back: its lowercased label unless it declares
    /// one, so a label can be reworded or translated without changing the wire.
    @Test func anAlertButtonMayKeepItsIDWhateverItsLabel() async throws {
        let remove = Action<Shelf>.sync("remove") { $0.books = [] }
        let screen = Screen<Shelf>("confirming", make: { Shelf() }) {
            Field("books", \.books, .array(Self.book.codec))
            PresentationSlot.isPresented("isHelpShown", style: .alert, \.isHelpShown, screen: Screen("sure", make: { Presence() }),
                                         alert: { _ in AlertContent(title: "Sure?", buttons: [
                                             AlertButton("Löschen", id: "delete", role: .destructive, action: remove),
                                             AlertButton("Abbrechen", role: .cancel),
                                         ]) })
            remove
        }
        let session = try FeatureCatalog(hosting: [.init(screen)])
            .makeSession(feature: "confirming", state: try JSONParser.parse(#"{"books":[{"id":"a","title":"A"}],"isHelpShown":true}"#))
        let (buttons, refused, books) = try await session.run { session throws(NavigationError) in
            let alert = session.navigation()["presentations"]?[0]
            let buttons = alert?["alert"]?["buttons"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            let id = alert?["id"]?.stringValue ?? "?"
            var refused = false
            do throws(NavigationError) { _ = try session.dismiss(presentation: id, button: "löschen") } catch { refused = true }
            _ = try session.dismiss(presentation: id, button: "delete")
            return (buttons, refused, session.describe().state["books"])
        }
        #expect(buttons == ["delete", "abbrechen"])
        #expect(refused, "the label is not the id once an id is declared")
        #expect(books == .array([]), "the declared id sent the button's action")
    }

    /// An alert's text is what its user reads: text that follows other state is a new alert when
    /// that state changes, and a button tapped on the old text is refused and does nothing. A
    /// value's alert is declared with a trailing closure, as a Bool's is.
    @Test func alertTextThatChangesIsANewAlertAndTheOldOnesButtonsAreRefused() async throws {
        let clear = Action<Shelf>.sync("clear") { $0.books = [] }
        let screen = Screen<Shelf>("clearing", make: { Shelf() }) {
            Field("books", \.books, .array(Self.book.codec))
            PresentationSlot.isPresented("isHelpShown", style: .alert, \.isHelpShown, screen: Screen("sure", make: { Presence() })) { shelf in
                AlertContent(title: "Clear \(shelf.books.count) books?", buttons: [AlertButton("Clear", role: .destructive, action: clear)])
            }
            PresentationSlot.item("picked", style: .alert, \.picked, screen: Self.book) { _, book in
                AlertContent(title: book.title, buttons: [AlertButton("OK")])
            }
            Action.sync("add") { $0.books.append(Book(id: "n\($0.books.count)", title: "New")) }
            clear
        }
        let state = #"{"books":[{"id":"a","title":"A"}],"isHelpShown":true,"picked":{"id":"a","title":"A"}}"#
        let session = try FeatureCatalog(hosting: [.init(screen)]).makeSession(feature: "clearing", state: try JSONParser.parse(state))
        let (titles, events, refused, books) = try await session.run { session throws(NavigationError) in
            let shown = session.navigation()["presentations"]?.arrayValue ?? []
            let titles = shown.compactMap { $0["alert"]?["title"]?.stringValue }
            let old = Self.presentation("isHelpShown", session) ?? "?"
            let events = try session.perform(target: "root", action: "add", arguments: nil).events.map(\.kind.rawValue)
            var refused = false
            do throws(NavigationError) { _ = try session.dismiss(presentation: old, button: "clear") } catch { refused = true }
            return (titles, events, refused, session.describe().state["books"]?.arrayValue?.count)
        }
        #expect(titles == ["Clear 1 books?", "A"])
        #expect(events == ["dismiss", "present", "state"])
        #expect(refused, "the alert the user read is gone")
        #expect(books == 2, "its button did nothing")
    }

    /// Asynchronous work may take a typed argument as synchronous actions do: resolved before the
    /// work starts, and refused, starting nothing, when it names nothing.
    @Test func aTaskTakesATypedArgumentResolvedBeforeItStarts() async throws {
        let screen = Screen<Loader>("loader", make: { Loader() }) {
            Field("loaded", \.loaded)
            Field("isLoading", \.isLoading)
            Action.task("load", .value("book", Self.book.codec)) { await $0.load($1) }
        }
        let session = try FeatureCatalog(hosting: [.init(screen)]).makeSession(feature: "loader", state: nil)
        let refused = try await session.run { session -> Bool in
            do throws(NavigationError) {
                _ = try session.perform(target: "root", action: "load", arguments: try? JSONParser.parse(#"{"book":7}"#))
                return false
            } catch {
                return true
            }
        }
        #expect(refused, "a book that is not a book")
        let outcome = try await session.run { session throws(NavigationError) in
            try session.perform(target: "root", action: "load", arguments: try? JSONParser.parse(#"{"book":{"id":"b","title":"B"}}"#))
        }
        #expect(outcome.effect != nil, "the work started")
        try await session.run { session in _ = await session.waitForEffects(of: outcome, timeout: .seconds(5)) }
        #expect(await session.describe().state["loaded"] == .array([.string("b")]))
    }

    /// Two declarations of one name would put a key in the state twice, or make an action or
    /// slot unreachable: the screen refuses them when it is built.
    @Test func aNameDeclaredTwiceStopsTheScreenBeingBuilt() async {
        await #expect(processExitsWith: .failure) {
            _ = Screen<Shelf>("twice", make: { Shelf() }) {
                Field("isBusy", \.isBusy)
                PresentationSlot.isPresented("isBusy", style: .alert, \.isBusy, screen: Screen("alert", make: { Presence() }))
            }
        }
        await #expect(processExitsWith: .failure) {
            _ = Screen<Shelf>("twice", make: { Shelf() }) {
                Action.sync("busy") { $0.isBusy = true }
                Action.sync("busy") { $0.isBusy = false }
            }
        }
    }

    /// A name is a screen's identity on the wire: one declaration met twice, or two that
    /// describe alike, are one screen; two that differ would leave one undescribed in
    /// `GET /features` and the contract, so the catalog refuses to be built.
    @Test func twoDifferentScreensOfOneNameStopTheCatalogBeingBuilt() async throws {
        let alike = FeatureCatalog(hosting: [.init(Self.shelf(picked: Self.book)), .init(Self.note())])
        #expect(alike.screens.map(\.name) == ["shelf", "note", "book"], "two declarations that describe alike are one screen")
        await #expect(processExitsWith: .failure) {
            _ = FeatureCatalog(hosting: [.init(Self.shelf(picked: Screen<Book>.value("note") { Book(id: "", title: "") }))])
        }
    }

    private static func note() -> Screen<Note> { Screen("note", make: { Note() }) { Field("text", \.text, bindable: true) } }

    private static func shelf(picked: Screen<Book>) -> Screen<Shelf> {
        Screen("shelf", make: { Shelf() }) {
            PresentationSlot.item("note", style: .sheet, \.note, screen: note())
            PresentationSlot.item("picked", style: .sheet, \.picked, screen: picked)
        }
    }

    @Test func settleLoweringLowersARaisedFlagAndLeavesAnIdleFeatureUnchanged() async throws {
        let idle = try session("{}")
        let unchanged = try await idle.run { session throws(NavigationError) in try session.settleEffects().version }
        #expect(unchanged == 0)
        let busy = try session(#"{"isBusy":true}"#)
        let lowered = try await busy.run { session throws(NavigationError) in
            _ = try session.settleEffects()
            return session.describe().state["isBusy"]
        }
        #expect(lowered == .bool(false))
    }
}
