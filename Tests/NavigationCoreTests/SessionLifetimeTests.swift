@testable import NavigationCore
import Observation
import Synchronization
import Testing

/// Models that count how many of them are alive, to catch a session that leaks its tree.
private let alive = Atomic<Int>(0)

@Observable private final class Page {
    var title = ""
    init() { alive.add(1, ordering: .relaxed) }
    deinit { alive.subtract(1, ordering: .relaxed) }
}

@Observable private final class Book {
    var pages: [Page] = []
    var open: Page?
    init() { alive.add(1, ordering: .relaxed) }
    deinit { alive.subtract(1, ordering: .relaxed) }
}

@Suite struct SessionLifetimeTests {
    private func catalog() -> FeatureCatalog {
        let page = Screen<Page>("page", make: { Page() }) { Field("title", \.title) }
        let element = StateCodec<Page>.oneOf("Element", [EnumCase("page", page.codec, embed: { $0 }, extract: { $0 })])
        let book = Screen<Book>("book", make: { Book() }) {
            StackSlot.path("pages", \.pages, edit: { book, body in body(&book.pages) }, accepts: ["page"],
                           screens: [page], codec: element, feature: { StackElement($0, page) })
            PresentationSlot.model("open", style: .sheet, \.open, screen: page)
        }
        return FeatureCatalog(hosting: [.init(book)])
    }

    @Test func anEndedSessionFreesEveryModelInItsStacksAndPresentations() async throws {
        let before = alive.load(ordering: .relaxed)
        do {
            let session = try catalog().makeSession(
                feature: "book",
                state: [
                    "pages": [["page": ["title": "one"]], ["page": ["title": "two"]], ["page": [:]]],
                    "open": ["title": "cover"],
                ]
            )
            #expect(alive.load(ordering: .relaxed) - before == 5)
            let tree = await session.navigation()
            #expect(tree["stacks"]?[0]?["elements"]?.arrayValue?.count == 3)
            #expect(tree["presentations"]?.arrayValue?.count == 1)
            await session.end(.deleted)
        }
        // Let the session's last tasks wind down.
        for _ in 0..<250 where alive.load(ordering: .relaxed) != before { try await Task.sleep(for: .milliseconds(20)) }
        #expect(alive.load(ordering: .relaxed) == before)
    }
}
