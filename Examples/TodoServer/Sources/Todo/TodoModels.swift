import Observation

/// One thing to do; a plain value in the list's state.
public struct TodoItem: Equatable, Sendable, Codable {
    public var id: String
    public var title: String
    public var isDone: Bool

    public init(id: String, title: String, isDone: Bool = false) {
        self.id = id
        self.title = title
        self.isDone = isDone
    }
}

/// The list. A tapped item drills down to its detail; "add" opens a sheet.
@Observable
public final class TodoListModel {
    public var items: [TodoItem]
    public var destination: Destination? {
        didSet { bindDestination() }
    }

    /// One destination at a time.
    public enum Destination {
        case detail(TodoDetailModel)
        case addItem(AddItemModel)
    }

    public init(items: [TodoItem] = [], destination: Destination? = nil) {
        self.items = items
        self.destination = destination
        bindDestination()
    }

    public func itemTapped(_ item: TodoItem) {
        destination = .detail(TodoDetailModel(item: item))
    }

    public func addButtonTapped() {
        destination = .addItem(AddItemModel())
    }

    /// The next free id: `t1`, `t2`, ... derived from the items, so nothing extra is stored.
    var nextID: String {
        let numbers = items.compactMap { Int($0.id.dropFirst()) }
        return "t\((numbers.max() ?? 0) + 1)"
    }

    /// Children tell the list what happened; one no longer shown changes nothing.
    private func bindDestination() {
        switch destination {
        case .detail(let model):
            model.onConfirmDelete = { [weak self, weak model] in
                guard let self, let model, case .detail(let shown)? = destination, shown === model else { return }
                items.removeAll { $0.id == model.item.id }
                destination = nil
            }
        case .addItem(let model):
            model.onSave = { [weak self, weak model] title in
                guard let self, case .addItem(let shown)? = destination, shown === model else { return }
                items.append(TodoItem(id: nextID, title: title))
                destination = nil
            }
        case nil:
            break
        }
    }
}

/// The "add item" sheet: a text field and a save button.
@Observable
public final class AddItemModel {
    /// Bound to the text field.
    public var title: String
    @ObservationIgnored var onSave: (String) -> Void = { _ in }

    public init(title: String = "") {
        self.title = title
    }

    /// Saves a non-blank title; a blank one keeps the sheet up.
    public func saveButtonTapped() {
        let trimmed = String(title.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !trimmed.isEmpty else { return }
        onSave(trimmed)
    }
}

/// One item's detail, with a confirmation before deleting it.
@Observable
public final class TodoDetailModel {
    public var item: TodoItem
    public var deleteConfirmationIsPresented: Bool
    @ObservationIgnored var onConfirmDelete: () -> Void = {}

    public init(item: TodoItem, deleteConfirmationIsPresented: Bool = false) {
        self.item = item
        self.deleteConfirmationIsPresented = deleteConfirmationIsPresented
    }

    public func deleteButtonTapped() {
        deleteConfirmationIsPresented = true
    }

    /// Tells the list, which removes the item and leaves the detail.
    public func confirmDeleteButtonTapped() {
        deleteConfirmationIsPresented = false
        onConfirmDelete()
    }
}
