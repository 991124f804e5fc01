import NavigationCore

/// The to-do feature as a server hosts it: `TodoFeature.catalog()` is all a server needs.
public enum TodoFeature {
    /// Sessions start on the list; the detail, the sheet and the dialog are found from it.
    public static func catalog() -> FeatureCatalog {
        FeatureCatalog(hosting: [.init(Screen<TodoListModel>.todos)])
    }
}

/// An item as it appears in state; never presented on its own. A plain value: its fields are
/// its `Codable` keys.
private let item = Screen<TodoItem>.value("TodoItem") { TodoItem(id: "", title: "") }

extension Screen where Subject == TodoListModel {
    /// The detail is a drill-down, adding an item a sheet.
    static var todos: Screen<TodoListModel> {
        Screen("todos", make: { TodoListModel() }) {
            Field("items", \.items, .array(item.codec))
            // Each case declared once: the state codec and the presentation slot come from it.
            DestinationField("destination", \.destination, [
                .model("detail", style: .drillDown, .detail,
                       embed: { .detail($0) }, extract: { if case .detail(let model) = $0 { model } else { nil } }),
                .model("addItem", style: .sheet, .addItem,
                       embed: { .addItem($0) }, extract: { if case .addItem(let model) = $0 { model } else { nil } }),
            ])
            Action.sync("itemTapped", .element("item", in: \.items, id: \.id)) { $0.itemTapped($1) }
            Action.sync("addButtonTapped") { $0.addButtonTapped() }
        }
    }
}

extension Screen where Subject == AddItemModel {
    static var addItem: Screen<AddItemModel> {
        Screen("addItem", make: { AddItemModel() }) {
            Field("title", \.title, bindable: true)
            Action.sync("saveButtonTapped") { $0.saveButtonTapped() }
        }
    }
}

extension Screen where Subject == TodoDetailModel {
    /// Deleting asks first, in a confirmation dialog.
    static var detail: Screen<TodoDetailModel> {
        let dialog = Screen<Presence>("deleteConfirmation", make: { Presence() })
        // Declared once, sent by the dialog's Delete button: no second spelling of its name.
        let confirmDelete = Action<TodoDetailModel>.sync("confirmDeleteButtonTapped") { $0.confirmDeleteButtonTapped() }
        return Screen("detail", make: { TodoDetailModel(item: item.make()) }) {
            Field("item", \.item, item.codec)
            PresentationSlot.isPresented("deleteConfirmationIsPresented", style: .confirmationDialog, \.deleteConfirmationIsPresented,
                                         screen: dialog) { model in
                AlertContent(title: "Delete \"\(model.item.title)\"?", buttons: [
                    AlertButton("Delete", role: .destructive, action: confirmDelete),
                    .cancel,
                ])
            }
            Action.sync("deleteButtonTapped") { $0.deleteButtonTapped() }
            confirmDelete
        }
    }
}
