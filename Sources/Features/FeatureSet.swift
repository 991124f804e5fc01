import NavigationCore

/// The features this server hosts, assembled once with their dependencies.
public enum FeatureSet {
    public static func catalog(_ dependencies: FeatureDependencies) -> FeatureCatalog {
        let settings = Screen<SettingsModel>.settings()
        let counter = Screen<CounterModel>.counter(dependencies, settings: settings)
        let app = Screen<AppModel>.app(dependencies, counter: counter, settings: settings)
        let wifi = Screen<WifiModel>.wifi(dependencies)
        let gallery = Screen<GalleryModel>.gallery(dependencies, counter: counter)
        return FeatureCatalog(hosting: [.init(app), .init(counter), .init(settings), .init(wifi), .init(gallery)])
    }
}
