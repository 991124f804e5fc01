/// How a client shows a presented feature. Models never know it; screens declare it.
public enum PresentationStyle: String, Sendable, CaseIterable {
    /// A modal alert with buttons.
    case alert
    /// A sheet of buttons from the bottom (an action sheet).
    case confirmationDialog
    /// A card over the owner, dismissed by a swipe down.
    case sheet
    /// A bubble pointing at a control (its `anchor`).
    case popover
    /// A modal screen covering everything.
    case fullScreenCover
    /// Pushed like a stack element, but driven by optional state.
    case drillDown
}
