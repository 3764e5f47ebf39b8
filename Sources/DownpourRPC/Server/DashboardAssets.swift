/// The dashboard's static files (`Resources/dashboard/`), compiled into the binary, by the path each is served at.
enum DashboardAssets {
    struct Asset: Sendable {
        var bytes: [UInt8]
        var contentType: String
    }

    /// `/` is the page; its style sheet and its scripts are under `/dashboard/`. The page loads `app.js` as an ES
    /// module, which imports the others by relative path (`./rpc.js`), so each module is served here too.
    static let byPath: [String: Asset] = [
        "/": Asset(bytes: PackageResources.index_html, contentType: html),
        "/index.html": Asset(bytes: PackageResources.index_html, contentType: html),
        "/dashboard/style.css": Asset(bytes: PackageResources.style_css, contentType: "text/css; charset=utf-8"),
        "/dashboard/app.js": Asset(bytes: PackageResources.app_js, contentType: javaScript),
        "/dashboard/actions.js": Asset(bytes: PackageResources.actions_js, contentType: javaScript),
        "/dashboard/connection.js": Asset(bytes: PackageResources.connection_js, contentType: javaScript),
        "/dashboard/format.js": Asset(bytes: PackageResources.format_js, contentType: javaScript),
        "/dashboard/forms.js": Asset(bytes: PackageResources.forms_js, contentType: javaScript),
        "/dashboard/graph.js": Asset(bytes: PackageResources.graph_js, contentType: javaScript),
        "/dashboard/render.js": Asset(bytes: PackageResources.render_js, contentType: javaScript),
        "/dashboard/rpc.js": Asset(bytes: PackageResources.rpc_js, contentType: javaScript),
        "/dashboard/view.js": Asset(bytes: PackageResources.view_js, contentType: javaScript),
    ]

    private static let html = "text/html; charset=utf-8"
    /// Module scripts are checked strictly: a browser runs one only with a JavaScript type.
    private static let javaScript = "text/javascript; charset=utf-8"
}
