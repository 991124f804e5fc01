/// What this build of navd is. The one place the version is written: `navd --version` and
/// anything else that reports the build read it from here.
public enum BuildInfo {
    /// The version `--version`, `/metrics` and the log report.
    public static let version = "1.0.0"
}
