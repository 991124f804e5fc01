@testable import NavigationCore

/// The JSON parser on any bytes, as request bodies arrive. It must refuse or accept without
/// trapping, and what it accepts must survive the writer: writing the value and parsing that
/// again gives an equal value, and writing is stable from then on (what the server writes is
/// always what it would read).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? JSONParser.parse(bytes) else { return 0 }
    let written = JSONWriter.bytes(value)
    guard let reread = try? JSONParser.parse(written) else {
        fatalError("the parser refuses what the writer wrote: \(String(decoding: written, as: UTF8.self))")
    }
    guard reread == value else {
        fatalError("a value changed through the writer: \(String(decoding: written, as: UTF8.self))")
    }
    guard JSONWriter.bytes(reread) == written else {
        fatalError("writing is not stable: \(String(decoding: written, as: UTF8.self))")
    }
    // What every client value goes through before it is used.
    _ = try? SessionLimits().check(value, at: JSONPath("state"))
    return 0
}
