import Foundation
import Testing

/// An alert's button sends only an action of the alert's owner: the compiler refuses any other,
/// so no user can tap a button whose action its owner does not have. Checked by type-checking a
/// declaration against the module as built, once as it should be written and once naming
/// another feature's action.
@Suite(.enabled(if: buildModules != nil, "the build's modules are not beside the test binary"))
struct AlertTypingTests {
    @Test func aButtonCannotSendAnotherFeaturesAction() throws {
        let right = try typecheck(Self.declaration(actionOf: "Shelf"))
        #expect(right.status == 0, "\(right.output)")
        let wrong = try typecheck(Self.declaration(actionOf: "Basket"))
        #expect(wrong.status != 0)
        #expect(wrong.output.contains("error:") && wrong.output.contains("Basket"), "\(wrong.output)")
    }

    /// The compiler of the toolchain whose runtime this test runs on (`…/usr/lib/swift/linux/
    /// libswiftCore.so` beside `…/usr/bin/swiftc`), which is the one that built `modules`; the
    /// first on `PATH` otherwise.
    private static let compiler: [String] = {
        let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
        if let line = maps.split(separator: "\n").first(where: { $0.hasSuffix("/libswiftCore.so") }),
           let path = line.split(separator: " ").last,
           let range = path.range(of: "/lib/swift/") {
            let swiftc = String(path[..<range.lowerBound]) + "/bin/swiftc"
            if FileManager.default.isExecutableFile(atPath: swiftc) { return [swiftc] }
        }
        return ["/usr/bin/env", "swiftc"]
    }()

    /// A slot of `Shelf` whose confirmation's button sends an action of `owner`'s.
    private static func declaration(actionOf owner: String) -> String {
        """
        import NavigationCore
        struct Shelf { var isConfirming = false }
        struct Basket {}
        let clear = Action<\(owner)>.sync("clear") { _ in }
        let slot = PresentationSlot<Shelf>.isPresented(
            "isConfirming", style: .alert, \\.isConfirming, screen: Screen("sure", make: { Presence() })
        ) { _ in
            AlertContent(title: "Clear?", buttons: [.cancel, AlertButton("Clear", role: .destructive, action: clear)])
        }
        """
    }

    /// Runs the toolchain's `swiftc -typecheck` on `source`, with the modules this test was built with.
    private func typecheck(_ source: String) throws -> (status: Int32, output: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("alert-typing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("main.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        let modules = try #require(buildModules)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.compiler[0])
        process.arguments = Array(Self.compiler.dropFirst()) + [
            "-typecheck", "-swift-version", "6", "-I", modules,
            "-module-cache-path", directory.appendingPathComponent("cache").path, file.path,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}

/// The build's `Modules`, beside the test binary (SwiftPM's layout, whatever `--build-path`).
private let buildModules: String? = {
    guard let binary = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
    let modules = URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("Modules").path
    return FileManager.default.fileExists(atPath: modules + "/NavigationCore.swiftmodule") ? modules : nil
}()
