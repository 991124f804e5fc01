import Observation

/// A navigation stack: the root screen pushes counters and settings.
@Observable
public final class AppModel {
    public var path: [Path]

    public enum Path {
        case counter(CounterModel)
        case settings(SettingsModel)
    }

    @ObservationIgnored private let dependencies: FeatureDependencies

    public init(path: [Path] = [], dependencies: FeatureDependencies) {
        self.path = path
        self.dependencies = dependencies
    }

    public func counterButtonTapped() {
        path.append(.counter(CounterModel(factClient: dependencies.factClient)))
    }

    public func settingsButtonTapped() {
        path.append(.settings(SettingsModel()))
    }
}
