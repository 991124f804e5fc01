import NavigationCore

extension Screen where Subject == SettingsModel {
    static func settings() -> Screen<SettingsModel> {
        Screen("settings", make: { SettingsModel() }, fields: [
            .value("isOn", \.isOn, .bool, bindable: true),
        ])
    }
}
