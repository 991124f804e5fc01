import Foundation
import Testing

/// An alert's button sends only an action of the alert's owner: the compiler refuses any other,
/// so no user can tap a button whose action its owner does not have. Checked by type-checking a
/// declaration against the module as built, once as it should be written and once naming
/// another feature's action.
@Suite(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/exe"), "finds the build's modules through /proc")) struct AlertTypingTests {
    @Test func aButtonCannotSendAnotherFeaturesAction() throws {
        let right = try typecheck(Self.declaration(actionOf: "Shelf"))
        #expect(right.status == 0, "\(right.output)")
        let wrong = try typecheck(Self.declaration(actionOf: "Basket"))
        #expect(wrong.status != 0)
        #expect(wrong.output.contains("AlertButton<Basket>"), "\(wrong.output)")
    }

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
        // The test binary sits beside the build's `Modules`.
        let binary = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let modules = binary.deletingLastPathComponent().appendingPathComponent("Modules").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swiftc", "-typecheck", "-swift-version", "6", "-I", modules, file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}
