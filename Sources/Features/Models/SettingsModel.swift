import Observation

/// A settings screen with one toggle.
@Observable
public final class SettingsModel {
    public var isOn: Bool

    public init(isOn: Bool = false) {
        self.isOn = isOn
    }
}
