import NavigationCore

/// The to-do feature as a server hosts it: `TodoFeature.catalog()` is all a server needs.
public enum TodoFeature {
    /// Sessions start on the list; the detail, the sheet and the dialog are found from it.
    public static func catalog() -> FeatureCatalog {
        FeatureCatalog(hosting: [.init(Screen<TodoListModel>.todos)])
    }
}

extension Screen where Subject == TodoItem {
    /// An item as it appears in state; never presented on its own.
    static var item: Screen<TodoItem> { Screen("TodoItem", make: { TodoItem(id: "", title: "") }, fields: [
        .value("id", \.id, .string),
        .value("title", \.title, .string),
        .value("isDone", \.isDone, .bool),
    ]) }
}

extension Screen where Subject == TodoListModel {
    /// The detail is a drill-down, adding an item a sheet.
    static var todos: Screen<TodoListModel> {
        let detail = Screen<TodoDetailModel>.detail
        let addItem = Screen<AddItemModel>.addItem
        let destination = StateCodec<TodoListModel.Destination>.oneOf("Destination", [
            EnumCase("detail", detail.codec, embed: { .detail($0) }, extract: \.detail),
            EnumCase("addItem", addItem.codec, embed: { .addItem($0) }, extract: \.addItem),
        ])
        return Screen("todos", make: { TodoListModel() },
            fields: [
                .value("items", \.items, .array(Screen<TodoItem>.item.codec)),
                .children("destination", \.destination, .optional(destination)),
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
            presentations: [
                .model("destination.detail", style: .drillDown, detail,
                       unwrap: { $0.destination?.detail }, dismiss: { $0.destination = nil }),
                .model("destination.addItem", style: .sheet, addItem,
                       unwrap: { $0.destination?.addItem }, dismiss: { $0.destination = nil }),
            ]
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
        return Screen("detail", make: { TodoDetailModel(item: Screen<TodoItem>.item.make()) },
            fields: [
                .value("item", \.item, Screen<TodoItem>.item.codec),
                .value("deleteConfirmationIsPresented", \.deleteConfirmationIsPresented, .bool),
            ],
            actions: [
                .sync("deleteButtonTapped") { $0.deleteButtonTapped() },
                .sync("confirmDeleteButtonTapped") { $0.confirmDeleteButtonTapped() },
            ],
            presentations: [
                .isPresented("deleteConfirmation", style: .confirmationDialog, \.deleteConfirmationIsPresented, screen: dialog) { model in
                    AlertContent(title: "Delete \"\(model.item.title)\"?", buttons: [
                        AlertButton("Delete", role: .destructive, action: "confirmDeleteButtonTapped"),
                        AlertButton("Cancel", role: .cancel),
                    ])
                },
            ]
        )
    }
}

extension TodoListModel.Destination {
    var detail: TodoDetailModel? {
        if case .detail(let model) = self { model } else { nil }
    }

    var addItem: AddItemModel? {
        if case .addItem(let model) = self { model } else { nil }
    }
}
