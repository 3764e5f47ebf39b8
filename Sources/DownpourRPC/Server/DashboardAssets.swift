/// The dashboard's static files (`Resources/dashboard/`), compiled into the binary, by the path each is served at.
enum DashboardAssets {
    struct Asset: Sendable {
        var bytes: [UInt8]
        var contentType: String
    }

    /// `/` is the page; its script and style sheet are under `/dashboard/`.
    static let byPath: [String: Asset] = [
        "/": Asset(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8"),
        "/index.html": Asset(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8"),
        "/dashboard/app.js": Asset(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8"),
        "/dashboard/style.css": Asset(bytes: PackageResources.style_css, contentType: "text/css; charset=utf-8"),
    ]
}
