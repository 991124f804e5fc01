@testable import NavigationCore
import Observation
import Testing

@Observable private final class Chapter {
    var title = ""
}

@Observable private final class Figure {
    var caption = ""
}

@Observable private final class Manuscript {
    enum Path {
        case chapter(Chapter)
        case figure(Figure)
        /// Put on the path only by the test of an undeclared case.
        case draft(Chapter)
    }

    var path: [Path] = []
}

extension Manuscript.Path {
    fileprivate var chapter: Chapter? { if case .chapter(let model) = self { model } else { nil } }
    fileprivate var figure: Figure? { if case .figure(let model) = self { model } else { nil } }
}

/// A path declared by its cases: the field's codec, what a push accepts and the screens the
/// catalog lists all come from one list, so a case cannot be spelled two ways.
@Suite struct PathCaseTests {
    private static let chapter = Screen<Chapter>("chapter", make: { Chapter() }) { Field("title", \.title) }
    private static let figure = Screen<Figure>("figure", make: { Figure() }) { Field("caption", \.caption) }

    private func catalog() -> FeatureCatalog {
        let manuscript = Screen<Manuscript>("manuscript", make: { Manuscript() }) {
            StackSlot.path("path", \.path, edit: { model, body in body(&model.path) }, typeName: "Page", [
                .model("chapter", Self.chapter, embed: { .chapter($0) }, extract: \.chapter),
                .model("figure", Self.figure, embed: { .figure($0) }, extract: \.figure),
            ])
            Action.sync("addDraft") { $0.path.append(.draft(Chapter())) }
        }
        return FeatureCatalog(hosting: [.init(manuscript)])
    }

    @Test func theCatalogListsEveryCaseAndItsScreenFromTheOneDeclaration() throws {
        let features = try #require(catalog().description["features"]?.arrayValue)
        #expect(features.compactMap { $0["name"]?.stringValue } == ["manuscript", "chapter", "figure"])
        let stack = features.first { $0["name"] == .string("manuscript") }?["stacks"]?[0]
        #expect(stack?["slot"] == .string("path"))
        #expect(stack?["accepts"] == .array([.string("chapter"), .string("figure")]))
    }

    @Test func eachCaseIsPushedDeepLinkedAndShownByItsOwnScreen() async throws {
        let session = try catalog().makeSession(feature: "manuscript", state: ["path": [["figure": ["caption": "map"]]]])
        let pushed = try await session.run { session throws(NavigationError) in
            try session.push(from: "root", value: ["chapter": ["title": "One"]]).events.map(\.kind.rawValue)
        }
        #expect(pushed == ["push"])
        let elements = try #require(await session.navigation()["stacks"]?[0]?["elements"]?.arrayValue)
        #expect(elements.map { $0["feature"] } == [.string("figure"), .string("chapter")])
        #expect(elements.map { $0["state"] } == [["caption": "map"], ["title": "One"]])
        #expect(await session.describe().state["path"] == [["figure": ["caption": "map"]], ["chapter": ["title": "One"]]])
    }

    @Test func aCaseTheDeclarationDoesNotNameIsRefusedWithTheCasesItDoes() async throws {
        let session = try catalog().makeSession(feature: "manuscript", state: nil)
        let refusal = try await session.run { session -> String? in
            do throws(NavigationError) {
                _ = try session.push(from: "root", value: ["draft": ["title": "x"]])
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal != nil)
        #expect(await session.describe().version == 0, "nothing changed")
        #expect(throws: NavigationError.self) {
            try catalog().makeSession(feature: "manuscript", state: ["path": [["draft": ["title": "x"]]]])
        }
    }

    /// The feature's own code putting an undeclared case on the path is a mistake in the
    /// declaration, with no screen to show it: it stops the process rather than show nothing.
    @Test func anElementOfAnUndeclaredCaseStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            // Errors end the body normally: only the stop fails the process.
            guard let session = try? PathCaseTests().catalog().makeSession(feature: "manuscript", state: nil) else { return }
            _ = try? await session.run { session throws(NavigationError) in
                try session.perform(target: "root", action: "addDraft", arguments: nil)
            }
        }
    }

    /// Declared by hand, a path may accept only cases of its codec: a name that is none would be
    /// advertised by `GET /features` and refused by every push.
    @Test func aPathAcceptingANameThatIsNoCaseOfItsCodecStopsTheScreenBeingBuilt() async {
        await #expect(processExitsWith: .failure) {
            let codec = StateCodec<Manuscript.Path>.oneOf("Page", [
                EnumCase("chapter", PathCaseTests.chapter.codec, embed: { .chapter($0) }, extract: \.chapter),
            ])
            _ = Screen<Manuscript>("manuscript", make: { Manuscript() }) {
                StackSlot.path("path", \.path, edit: { model, body in body(&model.path) }, accepts: ["chapter", "chaptr"],
                               screens: [PathCaseTests.chapter], codec: codec, feature: { StackElement($0.chapter ?? Chapter(), PathCaseTests.chapter) })
            }
        }
    }
}
