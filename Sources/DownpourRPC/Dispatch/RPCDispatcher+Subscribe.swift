import DownpourJSON
import DownpourQueue

extension RPCDispatcher {
    /// Downpour's one method of its own: a WebSocket session asks for the progress push (``ProgressPush``). It
    /// takes the token as every `aria2.*` method does. Over HTTP it is refused (there is no session to push to).
    public static let subscribeMethod = "downpour.subscribe"

    /// Answers a `downpour.subscribe` request on a WebSocket: `"OK"` and `true` when its token passes, aria2's
    /// `Unauthorized` and `false` otherwise.
    package func subscribe(_ request: JSONObject) -> (reply: RPCReply, subscribed: Bool) {
        let id = request["id"] ?? .null
        let (token, _) = TokenCheck.split(request["params"]?.arrayValue ?? [])
        var writer = JSONWriter()
        guard self.tokenCheck.authorizes(token) else {
            Self.write(Response(id: id, error: .unauthorized), to: &writer)
            return (RPCReply(body: writer.bytes, httpStatus: 400, isUnauthorized: true), false)
        }
        Self.write(Response(id: id, result: "OK"), to: &writer)
        var reply = RPCReply(body: writer.bytes)
        reply.provesToken = true
        return (reply, true)
    }
}
