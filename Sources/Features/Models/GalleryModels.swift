import Observation

/// An item a presentation is driven by; its `id` is its identity.
public struct GalleryItem: Identifiable, Equatable, Sendable, Codable {
    public var id: String
    public var title: String

    public init(id: String, title: String) {
        self.id = id
        self.title = title
    }
}

/// An alert that dismisses itself; each one shown gets a new id, so an old timer can tell it
/// is not its alert.
public struct TimedAlert: Equatable, Sendable, Codable {
    public var id: Int
    /// When it goes away, in seconds since 1970 (wall-clock time, so the deadline outlives a
    /// restart); nil for an alert made by a deep link, which only the user dismisses.
    public var dismissesAt: Double?

    public init(id: Int, dismissesAt: Double? = nil) {
        self.id = id
        self.dismissesAt = dismissesAt
    }
}

/// The style a gallery button presents in.
public enum GalleryStyle: String, CaseIterable, Sendable {
    case alert, confirmationDialog, sheet, popover, fullScreenCover, drillDown
}

/// A case-study catalog: every presentation style, driven by a Bool, by an optional item and by
/// an enum case; two optionals at once; three levels of nesting; a sheet that edits the parent's
/// optional through a binding; and an alert that dismisses itself.
@Observable
public final class GalleryModel {
    /// The styles presented by a Bool each (`alertIsPresented`, `sheetIsPresented`, …).
    public var presentedStyles: Set<GalleryStyle> = []
    public var items: [GalleryStyle: GalleryItem] = [:]
    public var destination: Destination?
    public var nested: NestedModel?
    /// Presented by unwrapping: the sheet edits this very optional.
    public var text: String?
    public var timedAlert: TimedAlert?
    /// How many items and self-dismissing alerts were made: state, so a session made from state
    /// (a restart, a deep link) numbers its next ones as the session that went on does.
    public var itemsMade = 0
    public var timedAlertsShown = 0

    public enum Destination {
        case alert(GalleryItem)
        case confirmationDialog(GalleryItem)
        case sheet(CounterModel)
        case popover(CounterModel)
        case fullScreenCover(CounterModel)
        case drillDown(CounterModel)
    }

    @ObservationIgnored private let dependencies: FeatureDependencies
    /// The running timer of the self-dismissing alert, which the next alert's replaces.
    @ObservationIgnored private var dismissalTimer: Task<Bool, Never>?

    public init(dependencies: FeatureDependencies) {
        self.dependencies = dependencies
    }

    public func isPresentedButtonTapped(_ style: GalleryStyle) {
        self[isPresented: style] = true
    }

    public subscript(isPresented style: GalleryStyle) -> Bool {
        get { presentedStyles.contains(style) }
        set {
            if newValue { presentedStyles.insert(style) } else { presentedStyles.remove(style) }
        }
    }

    public func itemButtonTapped(_ style: GalleryStyle) {
        guard let item = makeItem() else { return }
        items[style] = item
    }

    public func destinationButtonTapped(_ style: GalleryStyle) {
        let counter = CounterModel(factClient: dependencies.factClient)
        switch style {
        case .alert: if let item = makeItem() { destination = .alert(item) }
        case .confirmationDialog: if let item = makeItem() { destination = .confirmationDialog(item) }
        case .sheet: destination = .sheet(counter)
        case .popover: destination = .popover(counter)
        case .fullScreenCover: destination = .fullScreenCover(counter)
        case .drillDown: destination = .drillDown(counter)
        }
    }

    /// Two independent optionals, presented at once.
    public func sheetAndPopoverButtonTapped() {
        guard let sheet = makeItem(), let popover = makeItem() else { return }
        items[.sheet] = sheet
        items[.popover] = popover
    }

    public func nestedButtonTapped() {
        nested = NestedModel(level: 1)
    }

    public func editTextButtonTapped() {
        text = text ?? ""
    }

    /// Shows an alert that goes away by itself after a delay, unless the user dismissed it first.
    public func timedAlertButtonTapped() async {
        // Ids only grow, so a timer left over from an earlier alert never matches a newer one.
        let last = max(timedAlertsShown, timedAlert?.id ?? 0, 0)
        guard last < .max else { return }
        timedAlertsShown = last + 1
        let delay = dependencies.alertDismissDelay
        let alert = TimedAlert(id: timedAlertsShown, dismissesAt: dependencies.wallClock() + delay.seconds)
        timedAlert = alert
        await dismiss(alert, after: delay)
    }

    /// Readies the alert on screen for its timer to go on after a restart or a deep link stopped
    /// it. An alert past its deadline goes now, in the settling batch, not one batch later from a
    /// timer; a deadline more than the whole delay away (a deep link's, or a wall clock set back
    /// since) is moved to the whole delay from now, so the state says when the alert really goes
    /// and a client counting down from it counts to the right moment. True when a timer must go
    /// on.
    public func settleTimedAlert() -> Bool {
        guard var alert = timedAlert, let deadline = alert.dismissesAt else { return false }
        let now = dependencies.wallClock()
        let latest = now + dependencies.alertDismissDelay.seconds
        // Past due, or due now at the latest (no delay at all): settling again must find it gone.
        if deadline <= now || latest <= now {
            timedAlert = nil
            return false
        }
        if !(deadline <= latest) {
            alert.dismissesAt = latest
            timedAlert = alert
        }
        return true
    }

    /// Goes on with the timer of the alert on screen, for the time it has left: none when it is
    /// past due, never more than the whole delay.
    public func continueTimedAlert() async {
        guard let alert = timedAlert, let deadline = alert.dismissesAt else { return }
        let delay = dependencies.alertDismissDelay
        let left = min(max(0, deadline - dependencies.wallClock()), delay.seconds)
        await dismiss(alert, after: left.isFinite ? .milliseconds(Int64(left * 1000)) : delay)
    }

    /// Waits out `delay`, unless a newer alert's timer takes over: one timer per gallery, not
    /// one per tap, so a flood of taps holds nothing beyond the alert on screen.
    private func dismiss(_ alert: TimedAlert, after delay: Duration) async {
        dismissalTimer?.cancel()
        let timer = Task { await pause(for: delay) }
        dismissalTimer = timer
        let elapsed = await withTaskCancellationHandler { await timer.value } onCancel: { timer.cancel() }
        guard elapsed else { return }
        if timedAlert == alert { timedAlert = nil }
    }

    /// A new item, numbered past every item made and every item in the state (a deep link may
    /// show items its count does not cover; an item equal to one on screen would present nothing
    /// new). Nil once the numbers run out (a deep link's `item9223372036854775807`): the tap then
    /// does nothing.
    private func makeItem() -> GalleryItem? {
        let last = max(itemsMade, highestItemNumber)
        guard last < .max else { return nil }
        itemsMade = last + 1
        return GalleryItem(id: "item\(itemsMade)", title: "Item \(itemsMade)")
    }

    /// The highest `n` of the items in state whose id is `item<n>`; 0 without any.
    private var highestItemNumber: Int {
        var shown = Array(items.values)
        switch destination {
        case .alert(let item)?, .confirmationDialog(let item)?: shown.append(item)
        default: break
        }
        return shown.reduce(0) { highest, item in
            guard item.id.hasPrefix("item"), let number = Int(item.id.dropFirst(4)) else { return highest }
            return max(highest, number)
        }
    }
}

/// A presented feature that presents another of its kind.
@Observable
public final class NestedModel {
    public var level: Int
    public var child: NestedModel?

    public init(level: Int, child: NestedModel? = nil) {
        self.level = level
        self.child = child
    }

    /// Deep enough for any case study, and a bound on the tree a client can make the server keep.
    public static let maximumLevel = 32

    public func presentChildButtonTapped() {
        guard level < Self.maximumLevel else { return }
        child = NestedModel(level: level + 1)
    }
}
