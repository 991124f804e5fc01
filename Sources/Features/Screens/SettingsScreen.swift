import NavigationCore

extension Screen where Subject == SettingsModel {
    static func settings() -> Screen<SettingsModel> {
        Screen("settings", make: { SettingsModel() }) {
            Field("isOn", \.isOn, bindable: true)
        }
    }
}
