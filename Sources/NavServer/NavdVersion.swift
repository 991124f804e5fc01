/// navd's version: the one place it is written. `/metrics` reports it as `navd_build_info`, and
/// the `listening` log line carries it.
public enum NavdVersion {
    public static let current = "0.1.0"
}
