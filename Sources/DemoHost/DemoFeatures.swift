import Features
import NavServer
import NavigationCore

/// The demo features, hosted through the same public API any other package uses: the fact
/// service and delays come from `DemoSettings`, fact fetches are counted on `/metrics`.
public enum DemoFeatures {
    public static func catalog(_ settings: DemoSettings, _ services: FeatureServices) -> FeatureCatalog {
        let fetches = services.counter("navd_fact_fetches_total", help: "Fact service requests, by outcome.", label: "outcome")
        let dependencies = FeatureDependencies(
            factClient: MeteredFactClient(
                base: LimitedFactClient(
                    base: LiveFactClient(baseURL: settings.factBaseURL, timeout: settings.factTimeout,
                                         maxBodyBytes: min(LiveFactClient.maxBodyBytes, services.configuration.sessionLimits.maxStringBytes)),
                    limits: .init(total: settings.factMaxInFlight, perSession: settings.factMaxPerSession)
                ),
                record: fetches.increment
            ),
            connectDelay: settings.connectDelay,
            alertDismissDelay: settings.alertDismissDelay
        )
        return FeatureSet.catalog(dependencies)
    }
}
