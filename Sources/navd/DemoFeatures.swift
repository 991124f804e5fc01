import Features
import NavServer
import NavigationCore

/// The demo features, hosted through the same public API any other package uses: the fact
/// service and delays come from navd's configuration, fact fetches are counted on `/metrics`.
enum DemoFeatures {
    static func catalog(_ services: FeatureServices) -> FeatureCatalog {
        let configuration = services.configuration
        let fetches = services.counter("navd_fact_fetches_total", help: "Fact service requests, by outcome.", label: "outcome")
        let dependencies = FeatureDependencies(
            factClient: MeteredFactClient(
                base: LimitedFactClient(
                    base: LiveFactClient(baseURL: configuration.factBaseURL, timeout: configuration.factTimeout),
                    limits: .init(total: configuration.factMaxInFlight, perSession: configuration.factMaxPerSession)
                ),
                record: fetches.increment
            ),
            connectDelay: configuration.connectDelay,
            alertDismissDelay: configuration.alertDismissDelay
        )
        return FeatureSet.catalog(dependencies)
    }
}
