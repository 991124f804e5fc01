import NavigationCore

/// The features this server hosts, assembled once with their dependencies.
public enum FeatureSet {
    public static func catalog(_ dependencies: FeatureDependencies) -> FeatureCatalog {
        let alert = Screen<Presence>.alert
        let page = Screen<Presence>.page
        let settings = Screen<SettingsModel>.settings()
        let counter = Screen<CounterModel>.counter(dependencies, settings: settings)
        let app = Screen<AppModel>.app(dependencies, counter: counter, settings: settings)
        let connect = Screen<ConnectToNetworkModel>.connect(dependencies, alert: alert)
        let detail = Screen<NetworkDetailModel>.detail(alert: alert)
        let wifi = Screen<WifiModel>.wifi(dependencies, connect: connect, detail: detail)
        let gallery = Screen<GalleryModel>.gallery(dependencies, counter: counter, alert: alert, page: page)
        return FeatureCatalog(hosting: [.init(app), .init(counter), .init(settings), .init(wifi), .init(gallery)])
    }
}
