import Foundation
import HTTP

extension IOBackend {
    /// The backend the suite runs against: `NAVD_IO` (as navd reads it), else the platform's
    /// default. The test command runs the end-to-end suites once per backend.
    public static var underTest: IOBackend {
        ProcessInfo.processInfo.environment["NAVD_IO"].flatMap(IOBackend.init(rawValue:)) ?? .platformDefault
    }
}
