import NavigationCore

/// The to-do feature as a server hosts it: `TodoFeature.catalog()` is all a server needs.
public enum TodoFeature {
    /// Sessions start on the list; the detail, the sheet and the dialog are found from it.
    public static func catalog() -> FeatureCatalog {
        FeatureCatalog(hosting: [.init(Screen<TodoListModel>.todos)])
    }
}

extension Screen where Subject == TodoItem {
    /// An item as it appears in state; never presented on its own. A plain value: its fields
    /// are its `Codable` keys.
    static var item: Screen<TodoItem> { .value("TodoItem") { TodoItem(id: "", title: "") } }
}

extension Screen where Subject == TodoListModel {
    /// The detail is a drill-down, adding an item a sheet.
    static var todos: Screen<TodoListModel> {
        let detail = Screen<TodoDetailModel>.detail
        let addItem = Screen<AddItemModel>.addItem
        // Each case declared once: the state codec and the presentation slot come from it.
        let destination = DestinationField<TodoListModel, TodoListModel.Destination>("destination", \.destination, [
            .model("detail", style: .drillDown, detail,
                   embed: { .detail($0) }, extract: { if case .detail(let model) = $0 { model } else { nil } }),
            .model("addItem", style: .sheet, addItem,
                   embed: { .addItem($0) }, extract: { if case .addItem(let model) = $0 { model } else { nil } }),
        ])
        return Screen("todos", make: { TodoListModel() },
            fields: [
                .value("items", \.items, .array(Screen<TodoItem>.item.codec)),
                destination.field,
            ],
            actions: [
                .sync("itemTapped", [.string("item")]) { model, arguments throws(StateError) in
                    let id = try arguments.string("item")
                    guard let item = model.items.first(where: { $0.id == id }) else {
                        throw StateError(arguments.path("item"), "no item with id \"\(id)\"")
                    }
                    model.itemTapped(item)
                },
                .sync("addButtonTapped") { $0.addButtonTapped() },
            ],
            presentations: destination.slots
        )
    }
}

extension Screen where Subject == AddItemModel {
    static var addItem: Screen<AddItemModel> {
        Screen("addItem", make: { AddItemModel() },
            fields: [.value("title", \.title, .string, bindable: true)],
            actions: [.sync("saveButtonTapped") { $0.saveButtonTapped() }]
        )
    }
}

extension Screen where Subject == TodoDetailModel {
    /// Deleting asks first, in a confirmation dialog.
    static var detail: Screen<TodoDetailModel> {
        let dialog = Screen<Presence>("deleteConfirmation", make: { Presence() })
        // Declared once, sent by the dialog's Delete button: no second spelling of its name.
        let confirmDelete = Action<TodoDetailModel>.sync("confirmDeleteButtonTapped") { $0.confirmDeleteButtonTapped() }
        return Screen("detail", make: { TodoDetailModel(item: Screen<TodoItem>.item.make()) },
            fields: [
                .value("item", \.item, Screen<TodoItem>.item.codec),
                .value("deleteConfirmationIsPresented", \.deleteConfirmationIsPresented, .bool),
            ],
            actions: [
                .sync("deleteButtonTapped") { $0.deleteButtonTapped() },
                confirmDelete,
            ],
            presentations: [
                .isPresented("deleteConfirmation", style: .confirmationDialog, \.deleteConfirmationIsPresented, screen: dialog) { model in
                    AlertContent(title: "Delete \"\(model.item.title)\"?", buttons: [
                        AlertButton("Delete", role: .destructive, action: confirmDelete),
                        AlertButton("Cancel", role: .cancel),
                    ])
                },
            ]
        )
    }
}
