import HTTP
import NavigationCore
import SessionStorage
import WebClient

/// Routes requests to the sessions: authenticates, validates the request on the loop thread,
/// then runs the transaction on the session's executor (the event loop it lives on: in place
/// when that is the request's own) and answers from there. Nothing a request does runs on the
/// cooperative pool: what must wait runs as a task on the request's loop.
final class APIHandler: HTTPHandler {
    let catalog: FeatureCatalog
    let store: SessionStore
    let metrics: Metrics
    let log: RequestLog
    let configuration: ServerConfiguration
    let lifecycle: Lifecycle
    let memory = MemoryReturn()
    let persistence: SessionPersistence
    /// The files served as they are, `/openapi.yaml` describing this server's own features.
    let assets: [String: WebAsset]
    let claims = SessionClaims()
    /// Which host names requests may be for.
    let hosts: HostPolicy

    init(catalog: FeatureCatalog, store: SessionStore, metrics: Metrics, log: RequestLog,
         configuration: ServerConfiguration, lifecycle: Lifecycle, persistence: SessionPersistence) {
        self.persistence = persistence
        self.catalog = catalog
        self.store = store
        self.metrics = metrics
        self.log = log
        self.configuration = configuration
        self.lifecycle = lifecycle
        self.hosts = configuration.hostPolicy
        var assets = WebAsset.all
        if let template = assets["/openapi.yaml"] {
            assets[template.path] = WebAsset(path: template.path, contentType: template.contentType,
                                             bytes: Array(OpenAPIDocument.render(String(decoding: template.bytes, as: UTF8.self), for: catalog,
                                                                                    servedBy: configuration.serverName, version: configuration.serverVersion).utf8))
        }
        self.assets = assets
    }

    func handle(_ request: HTTPRequest, responder: HTTPResponder) {
        let started = ContinuousClock.now
        let matched = Route.match(request.encodedPath)
        let answer = Answer(request: request, responder: responder, route: matched?.route, started: started, handler: self)
        if let refusal = misdirected(request, route: matched?.route) {
            return answer.fail(refusal)
        }
        guard let (route, parameters) = matched else {
            return answer.fail(Self.notFound(request))
        }
        if request.method == "OPTIONS" {
            return answer.send(preflight(route, origin: CORSPolicy.origin(of: request)))
        }
        do {
            try checkMethod(route, request)
            try Self.refuseRepeatedParameters(request)
            try dispatch(route, parameters, request, answer)
        } catch {
            answer.fail(error)
        }
    }

    /// A request waiting for `100 Continue` is answered at once when no body could make it
    /// succeed: a path navd does not have, a method the path does not answer, a repeated query
    /// parameter, or a session this node holds (or, alone, knows it does not have) with a token
    /// that does not open it. Checks only: nothing is used up or changed.
    func answerBeforeBody(_ request: HTTPRequest, peer: PeerAddress) -> HTTPResponse? {
        guard request.method != "OPTIONS" else { return nil }
        let matched = Route.match(request.encodedPath)
        let refusal: APIError?
        do throws(APIError) {
            if let refusal = misdirected(request, route: matched?.route) { throw refusal }
            guard let (route, parameters) = matched else { throw Self.notFound(request) }
            try checkMethod(route, request)
            try Self.refuseRepeatedParameters(request)
            if route.isSessionRoute, route != .events, persistence.shared == nil || store.session(parameters[0]) != nil {
                _ = try authorize(parameters[0], request, allowQueryToken: false)
            }
            refusal = nil
        } catch {
            refusal = error
        }
        guard let refusal else { return nil }
        let exchange = Exchange(request: request, peer: peer, route: matched?.route, started: .now, handler: self)
        return exchange.finish(refusal.response, timed: false, logging: refusal.logged)
    }

    /// A request for a host name this server was not told it serves (`HostPolicy`), unless it
    /// only asks whether navd is alive or ready: probes ask by whatever name they were given.
    private func misdirected(_ request: HTTPRequest, route: Route?) -> APIError? {
        guard route != .healthz, route != .readyz, !hosts.allows(request.authority) else { return nil }
        let host = String(request.authority ?? "")
        var refusal = APIError(421, "misdirected_request",
                               "this server does not answer for the host \"\(host)\"; name it in --allowed-hosts if it should (a guard against DNS rebinding)")
        // A host name has at most 253 characters; what is longer is cut, as a message is.
        refusal.logged = [("host", APIError.cut(host, atMost: 256))]
        return refusal
    }

    private static func notFound(_ request: HTTPRequest) -> APIError {
        APIError(404, "not_found", "no such endpoint: \(request.path)")
    }

    private func checkMethod(_ route: Route, _ request: HTTPRequest) throws(APIError) {
        let method = request.method == "HEAD" ? "GET" : request.method
        guard route.methods.contains(method) else {
            throw APIError(405, "method_not_allowed", "\(request.method) is not allowed on \(request.path)",
                           headers: ["Allow": allowed(route)])
        }
    }

    /// What the HTTP layer refuses on its own is answered like every other failure: the API's
    /// error body, CORS and the request id (when the head was read), the metrics and the log.
    func response(to refusal: HTTPRefusal) -> HTTPResponse {
        let exchange = Exchange(request: refusal.request, peer: refusal.peer,
                                route: refusal.request.flatMap { Route.match($0.encodedPath)?.route },
                                started: .now, handler: self)
        return exchange.finish(APIError(refusal.error).response, timed: false)
    }

    private func dispatch(_ route: Route, _ parameters: [String], _ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        switch route {
        case .healthz:
            answer.send(.json(status: 200, Array(#"{"status":"ok"}"#.utf8)))
        case .readyz:
            if !lifecycle.isReady {
                answer.fail(APIError(503, "not_ready", lifecycle.isLeaving ? "shutting down" : "starting"))
            } else if persistence.isFailing {
                answer.fail(APIError(503, "storage_unavailable", "the session store refuses writes: its last commit failed (the log's store_unavailable line says why)"))
            } else if let stalled = persistence.stalledFor {
                answer.fail(APIError(503, "storage_unavailable", "the session store has not finished a commit in \(Int(stalled / .seconds(1))) s"))
            } else {
                answer.send(.json(status: 200, Array(#"{"status":"ready"}"#.utf8)))
            }
        case .metrics:
            answer.send(HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                                     body: Array((metrics.render(sessionsOpen: store.count, memory: store.memory) + persistence.renderMetrics()).utf8)))
        case .features:
            answer.send(.json(status: 200, catalog.description.bytes))
        case .asset:
            guard let asset = assets[parameters[0]] else { throw Self.notFound(request) }
            answer.send(StaticFiles.response(asset, request))
        case .sessions:
            try createSession(request, answer)
        default:
            if persistence.shared != nil, store.session(parameters[0]) == nil {
                return try claimThenServe(route, parameters, request, answer)
            }
            let hosted = try authorize(parameters[0], request, allowQueryToken: route == .events)
            hosted.touch()
            if route == .events, persistence.shared != nil, let resumed = Self.lastEventID(request), resumed > 0 {
                return resumeFromTheLatestCopy(after: resumed, route, parameters, hosted, request, answer)
            }
            try sessionRoute(route, parameters, hosted, request, answer)
        }
    }

    /// A stream resuming after an id this node's copy never issued, on a store nodes share:
    /// another node may have moved the session on while this one did not hear of it (its
    /// listening connection down: the announcement is late, not lost). The store says whether it
    /// did; if so the copy goes, as on hearing it, and the session is claimed again with what the
    /// store holds, so the client resumes where it was rather than from a snapshot older than
    /// what it has. An id nobody issued gets a snapshot, as on one node, and moves nothing.
    private func resumeFromTheLatestCopy(after resumed: Int, _ route: Route, _ parameters: [String],
                                         _ hosted: HostedSession, _ request: HTTPRequest, _ answer: Answer) {
        Task(executorPreference: answer.executor) { [self] in
            do throws(APIError) {
                let issued = (try? await hosted.navigation.run { $0.lastEventID }) ?? .max
                if resumed > issued, let held = hosted.epoch, let epoch = await persistence.currentEpoch(of: hosted.id), epoch > held {
                    release(hosted.id, olderThan: epoch)
                    return try claimThenServe(route, parameters, request, answer)
                }
                try sessionRoute(route, parameters, hosted, request, answer)
            } catch {
                answer.fail(error)
            }
        }
    }

    // MARK: - Sessions other nodes may hold

    /// A session this node does not hold, on a store several nodes share: loaded and taken over
    /// when the request's token opens it, then served like any other. Another node that held
    /// it lets it go. A stream ticket cannot open it: tickets live on the node that issued them.
    private func claimThenServe(_ route: Route, _ parameters: [String], _ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        let id = parameters[0]
        guard Identifiers.isSessionID(id) else { throw .unknownSession(id) }
        guard !lifecycle.isShuttingDown else { throw .shuttingDown }
        let allowQueryToken = route == .events
        let token = Self.presentedToken(request, allowQueryToken: allowQueryToken).map(String.init)
        // Needs no room here: nothing is taken over, and a full node must still free room.
        if route == .session && request.method == "DELETE" {
            return deleteUnheld(id, token: token, ifMatch: try Self.ifMatch(request), answer)
        }
        guard store.hasRoom() else { throw store.overCapacity }
        let ticket = request.headers["Authorization"] == nil && allowQueryToken && request.queryValue("ticket") != nil
        Task(executorPreference: answer.executor) { [self] in
            do throws(APIError) {
                try await claim(id, token: token, ticket: ticket, executor: answer.executor)
                let hosted = try authorize(id, request, allowQueryToken: allowQueryToken)
                hosted.touch()
                try sessionRoute(route, parameters, hosted, request, answer)
            } catch {
                answer.fail(error)
            }
        }
    }

    /// `DELETE` of a session another node may hold: deleted in the store without taking it over,
    /// so the node that holds it hears of a deletion, not a takeover, and its streams get `end`.
    /// With `If-Match`, the store compares the version in the transaction that would delete it.
    private func deleteUnheld(_ id: String, token: String?, ifMatch: Int?, _ answer: Answer) {
        Task(executorPreference: answer.executor) { [self] in
            switch await persistence.delete(id, token: token, ifVersion: ifMatch) {
            case .success(.deleted): answer.send(HTTPResponse(status: 204))
            case .success(.notFound): answer.fail(.unknownSession(id))
            case .success(.refused): answer.fail(.unauthorized)
            case .success(.versionMismatch(let current)):
                answer.fail(APIError(NavigationError.versionMismatch(expected: ifMatch ?? current, current: current)))
            case .failure(.outcomeUnknown): answer.fail(.commitUnsettled)
            case .failure: answer.fail(APIError(.storageUnavailable))
            }
        }
    }

    /// Makes sure session `id` is held here, claiming it from the shared store if need be; one
    /// claim per session at a time on this node.
    private func claim(_ id: String, token: String?, ticket: Bool, executor: LoopExecutor) async throws(APIError) {
        var attempts = 0
        while store.session(id) == nil {
            guard await claims.begin(id) else { continue }
            // Taken over again each time (two routers that disagree): answered like a change
            // caught in a move, to be sent again, rather than bounced between nodes for long.
            guard attempts < Self.claimAttempts else {
                claims.finish(id)
                throw .unknownSession(id)
            }
            attempts += 1
            let log = log
            let claimed = await persistence.claim(id, token: token, catalog: catalog, limits: configuration.sessionLimits,
                                                  executor: executor, metrics: metrics) {
                log.note(.warn, "session_unclaimable", [("session", .string($0)), ("reason", .string($1))])
            }
            var refusal: APIError?
            switch claimed {
            case .hosted(let hosted):
                if !(await install(hosted)) { refusal = store.overCapacity }
            case .notFound: refusal = .unknownSession(id)
            case .refused: refusal = ticket ? .invalidTicket : .unauthorized
            case .failed: refusal = APIError(.storageUnavailable)
            }
            // Taken over again (or deleted) before it was held here: let go now what was heard then.
            if let heard = claims.finish(id) { release(id, olderThan: heard) }
            if let refusal { throw refusal }
        }
    }

    /// Claims of one session a request makes at most.
    static let claimAttempts = 3

    /// Hosts a session just claimed: its streams wired before anyone can find it, then what its
    /// previous owner's effects left unfinished settled, as after a restart. Not if it was taken
    /// over again meanwhile (then `true`: the caller claims again), and let go at once if that
    /// is heard while it goes in.
    private func install(_ hosted: HostedSession) async -> Bool {
        let epoch = hosted.epoch ?? 0
        if claims.heardEpoch(hosted.id) ?? 0 > epoch {
            await hosted.navigation.suspend()
            return true
        }
        await attachEvents(hosted)
        guard store.insert(hosted) else {
            await hosted.navigation.suspend()
            return false
        }
        if let heard = claims.heardEpoch(hosted.id), heard > epoch {
            release(hosted.id, olderThan: heard)
            return true
        }
        _ = try? await hosted.navigation.settleEffects()
        return true
    }

    /// Deletes `hosted` from the store, then ends it with `reason` (`end` on its streams): what
    /// `DELETE` and the idle reaper both do. Gone from the store first, so an answer that says
    /// so holds after a restart. `.failed`: nothing changed; `.lost`: another node has it now,
    /// and only this node's copy goes (unless a deletion of it here is still under way, which
    /// ends it); `.deleted` or `.expired`: another node deleted it, or its sweep, first (a
    /// retried `DELETE`, routers that disagree), so it ends here all the same, for that reason;
    /// `.unsettled`: the store cannot say whether it deleted it, so this node's copy goes.
    func end(_ hosted: HostedSession, _ reason: NavigationSession.EndReason) async -> SessionPersistence.Committed {
        hosted.markEnding(true)
        let committed = await persistence.commit([.delete(id: hosted.id, expired: reason == .expired)], of: hosted)
        switch committed {
        case .durable, .deleted, .expired:
            let ending: NavigationSession.EndReason = switch committed {
            case .deleted: .deleted
            case .expired: .expired
            default: reason
            }
            // This very copy: a copy let go and claimed again meanwhile is ended by the
            // announcement of the deletion.
            if store.remove(identical: hosted) {
                await hosted.navigation.end(ending)
                memory.sessionEnded()
            }
        case .failed:
            hosted.markEnding(false)
            // A deletion announced meanwhile was left to this one, which failed: it ends it now.
            if !hosted.isEnding, let ended = hosted.endedElsewhere, store.remove(identical: hosted) {
                await hosted.navigation.end(ended)
                memory.sessionEnded()
            }
        case .lost:
            hosted.markEnding(false)
            if !hosted.isEnding { release(hosted.id, olderThan: (hosted.epoch ?? 0) + 1) }
        case .unsettled:
            hosted.markEnding(false)
            guard !hosted.isEnding else { break }
            // The deletion's announcement, heard meanwhile, says it happened: it ends here.
            if let ended = hosted.endedElsewhere, store.remove(identical: hosted) {
                await hosted.navigation.end(ended)
                memory.sessionEnded()
            } else {
                // Deleted or not, only the store knows: this copy goes, without `end`, and the
                // next request finds the session there or not.
                letGoUnsettled(hosted.id, epoch: hosted.epoch ?? 0)
            }
        }
        return committed
    }

    /// Ends `hosted` as expired if it is still idle for `ttl`, closed to changes first as a
    /// `DELETE` closes it: a change that reaches it while its deletion is on the way is told to
    /// try again (and then finds it gone), never acknowledged for a write the deletion drops.
    /// Idle is decided on the session's executor, with the closing, so a request that touched it
    /// before keeps it. A deletion that failed opens it again, to be tried next round.
    func expire(_ hosted: HostedSession, idleFor ttl: Duration) async {
        let session = hosted.navigation
        // Not idle any more, already ending (a `DELETE` under way) or ended: nothing to do here.
        let closed = try? await session.run { session throws(NavigationError) -> Bool in
            guard hosted.isIdle(for: ttl) else { return false }
            try session.close(ifMatch: nil)
            return true
        }
        guard closed == true else { return }
        if case .failed = await end(hosted, .expired) { await session.reopen() }
    }

    /// Lets session `id` go if this node holds it with an epoch under `epoch`: another node took
    /// it over, or deleted it. After a takeover its streams close without `end`, as at
    /// shutdown: the session is not over, and their clients reconnect with `Last-Event-ID`
    /// through the router to the node that owns it now, which resumes them. The next request
    /// for it here claims it again. After a deletion the session is over: its streams get `end`.
    func release(_ id: String, olderThan epoch: Int) {
        claims.heard(id, epoch: epoch)
        guard let hosted = store.remove(id, olderThan: epoch) else {
            // A deletion this node has under way ends the session itself, with `end`: the
            // rollback of a write refused for the same deletion must not close the streams first.
            if SessionEpoch.isGone(epoch), let held = store.session(id), held.isEnding { held.markLetGo(epoch: epoch) }
            return
        }
        hosted.markLetGo(epoch: epoch)
        memory.sessionEnded()
        if SessionEpoch.isGone(epoch) {
            Task { await hosted.navigation.end(epoch == SessionEpoch.expired ? .expired : .deleted) }
            return
        }
        persistence.noteReleased()
        closeStreamsAndSuspend(hosted)
    }

    /// Lets go this node's copy of session `id`, held with `epoch`, whose commit was left
    /// unsettled (`StorageError.outcomeUnknown`): the store may hold that commit or not, so only
    /// the store's copy is to be trusted. Its streams close without `end`, as after a takeover,
    /// and the next request for it claims it again, reading what the store holds.
    func letGoUnsettled(_ id: String, epoch: Int) {
        guard let hosted = store.remove(id, olderThan: epoch + 1) else { return }
        hosted.markLetGo(.commitUnsettled)
        memory.sessionEnded()
        closeStreamsAndSuspend(hosted)
    }

    private func closeStreamsAndSuspend(_ hosted: HostedSession) {
        hosted.events.closeAll()
        Task {
            await hosted.navigation.suspend()
            // A stream that was attaching meanwhile.
            hosted.events.closeAll()
        }
    }

    /// The bearer token a request presents, from `Authorization` or, on the event stream,
    /// `?token=`; nil when there is none (or a stream ticket instead).
    private static func presentedToken(_ request: HTTPRequest, allowQueryToken: Bool) -> Substring? {
        var authorization: String?
        for field in request.headers where ASCII.namesEqual(field.name, "Authorization") {
            // Two credentials: which one a proxy in front checked is unknown, so neither counts.
            guard authorization == nil else { return nil }
            authorization = field.value
        }
        if let header = authorization {
            // `Bearer <token>`, the scheme in any case, read on the bytes. A token has no spaces
            // (RFC 6750): one with spaces in it is some other credential, and opens nothing.
            let bytes = header.utf8.drop { $0 == UInt8(ascii: " ") }
            guard let space = bytes.firstIndex(of: UInt8(ascii: " ")),
                  bytes[..<space].elementsEqual("bearer".utf8, by: { $0 | 0x20 == $1 }) else { return nil }
            let token = bytes[space...].drop { $0 == UInt8(ascii: " ") }
            guard !token.contains(UInt8(ascii: " ")) else { return nil }
            return Substring(token)
        }
        guard allowQueryToken, request.queryValue("ticket") == nil else { return nil }
        return request.queryValue("token").map { $0[...] }
    }

    /// The `Authorization` header counts when present; otherwise the event stream also takes a
    /// one-time `?ticket=` (used up by `GET`, only checked by `HEAD`) or the token as `?token=`.
    private func authorize(_ id: String, _ request: HTTPRequest, allowQueryToken: Bool) throws(APIError) -> HostedSession {
        guard let hosted = store.session(id) else { throw .unknownSession(id) }
        if request.headers["Authorization"] == nil, allowQueryToken, let ticket = request.queryValue("ticket") {
            guard hosted.tickets.redeem(ticket, consume: request.method == "GET") else { throw .invalidTicket }
            return hosted
        }
        guard hosted.accepts(Self.presentedToken(request, allowQueryToken: allowQueryToken)) else { throw .unauthorized }
        return hosted
    }

    // MARK: - Sessions

    private func createSession(_ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        guard !lifecycle.isShuttingDown else { throw .shuttingDown }
        let body = try RequestBody.object(request, allowed: ["feature", "state"])
        let feature = try RequestBody.string(body, "feature")
        guard store.hasRoom() else {
            throw store.overCapacity
        }
        // `null` is the defaults, as absent is. (Not `flatMap { $0 == .null ? nil : $0 }`: JSON
        // takes the `nil` literal as JSON's own null, which would pass it on.)
        var state = body["state"]
        if case .null? = state { state = nil }
        let navigation: NavigationSession
        do {
            // It lives on the loop its creator's requests arrive on.
            navigation = try catalog.makeSession(feature: feature, state: state, limits: configuration.sessionLimits,
                                                 executor: answer.executor)
        } catch {
            throw APIError(error)
        }
        let token = Identifiers.token()
        // On a shared store, the node that creates a session owns it until another claims it.
        let hosted = HostedSession(id: Identifiers.sessionID(), tokenHash: TokenHash.sha256(Array(token.utf8)),
                                   epoch: persistence.shared == nil ? nil : SessionEpoch.created, stored: false,
                                   navigation: navigation, events: SessionEvents(metrics: metrics))
        guard store.insert(hosted) else {
            throw store.overCapacity
        }
        let (persistence, store) = (persistence, store)
        let deepLinked = state != nil
        Task(executorPreference: answer.executor) { [self] in
            await attachEvents(hosted)
            // A 201 means the session is durable: it is written with its first snapshot first.
            if let journal = persistence.journal(for: hosted.id, epoch: hosted.epoch) {
                let first = await navigation.makeDurable(journal: journal)
                let record = SessionRecord(id: hosted.id, tokenHash: hosted.tokenHash, feature: feature, created: Self.wallClock())
                guard await persistence.commit([.create(record, SessionPersistence.snapshot(first))]) else {
                    store.remove(hosted.id)
                    return answer.fail(APIError(.storageUnavailable))
                }
                hosted.markStored()
            }
            // A deep link starts no work: the catalog made the session from its state settled,
            // and what settling continues (a timed alert's timer) starts here, what it has done
            // so far durable before the 201. Not before the session's own record: an effect it
            // starts may write, and a write of a session the store lacks is dropped.
            if deepLinked {
                _ = try? await navigation.durable(navigation.startSettledWork())
                // Which version the store holds is unknown, and the copy was let go: no 201 for it.
                if hosted.hadCommitUnsettled { return answer.fail(.commitUnsettled) }
            }
            let (version, state, tree) = await navigation.describe()
            let body = JSON.object(JSONObject([
                ("id", .string(hosted.id)), ("token", .string(token)),
                ("version", .int(version)), ("state", state), ("navigation", tree),
            ]))
            answer.send(.json(status: 201, body.bytes, headers: ["Location": "/sessions/\(hosted.id)", "ETag": "\"\(version)\""]))
        }
    }

    private func sessionRoute(_ route: Route, _ parameters: [String], _ hosted: HostedSession,
                              _ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        let session = hosted.navigation
        switch (route, request.method) {
        case (.session, "DELETE"):
            let ifMatch = try Self.ifMatch(request)
            Task(executorPreference: answer.executor) { [self] in
                // A conditional delete deletes only the version the client last saw: nothing
                // changes the session between the check and the deletion.
                do throws(NavigationError) {
                    try await session.run { session throws(NavigationError) in try session.close(ifMatch: ifMatch) }
                } catch {
                    return fail(error, hosted, answer)
                }
                let committed = await end(hosted, .deleted)
                // Open again before the answer, so a client that retries at once is served.
                if case .failed = committed { await session.reopen() }
                switch committed {
                // Deleted meanwhile by another node: deleted, as asked.
                case .durable, .deleted: answer.send(HTTPResponse(status: 204))
                case .failed: answer.fail(APIError(.storageUnavailable))
                case .unsettled: answer.fail(.commitUnsettled)
                // Expired before it (as every other node answers), or another node has it now.
                case .expired, .lost: answer.fail(.unknownSession(hosted.id))
                }
            }
        case (.session, _):
            session.isolated { session in
                let (version, state, tree) = session.describe()
                let body = JSON.object(JSONObject([
                    ("id", .string(hosted.id)), ("feature", .string(hosted.feature)),
                    ("version", .int(version)), ("state", state), ("navigation", tree),
                ]))
                answer.send(.json(status: 200, body.bytes, headers: ["ETag": "\"\(version)\""]))
            }
        case (.navigation, _):
            session.isolated { answer.send(.json(status: 200, $0.navigation().bytes)) }
        case (.events, _):
            try openStream(hosted, request, answer)
        case (.streamTickets, _):
            let body = JSON.object(JSONObject([
                ("ticket", .string(hosted.tickets.issue())),
                ("expiresIn", .int(Int(StreamTickets.lifetime.components.seconds))),
            ]))
            // A credential: no cache may keep it.
            answer.send(.json(status: 201, body.bytes, headers: ["Cache-Control": "no-store"]))
        default:
            try mutate(route, parameters, hosted, request, answer)
        }
    }

    /// Every request that changes a session answers `{"version","events"}`.
    private func mutate(_ route: Route, _ parameters: [String], _ hosted: HostedSession,
                        _ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        let session = hosted.navigation
        guard !lifecycle.isShuttingDown else { throw .shuttingDown }
        let ifMatch = try Self.ifMatch(request)
        let wait = try Self.wait(request, limit: configuration.waitTimeout)
        let change = try Self.change(route, parameters, request)
        guard let wait else {
            // The hot path: the change in place on the session's loop, the answer once it is
            // durable, straight from the store's notice; no task, no continuation.
            return session.isolated { [self] session in
                do throws(NavigationError) {
                    let outcome = try change.apply(to: session, ifMatch: ifMatch)
                    // Answered on the request's own loop, where the response is made too: made
                    // earlier and carried here, its headers would be copied to get the request id.
                    session.whenDurable(outcome, on: answer.executor) { [self] result in
                        switch result {
                        case .success(let outcome): answer.send(Self.outcomeResponse(outcome))
                        case .failure(let error): fail(error, hosted, answer)
                        }
                    }
                } catch {
                    fail(error, hosted, answer)
                }
            }
        }
        // A request that waits is measured apart: its latency is mostly its effects'.
        let waiting = answer.waiting()
        Task(executorPreference: answer.executor) { [self] in
            do throws(NavigationError) {
                // On the session's actor throughout, the answer included (it only queues bytes).
                try await hosted.inUse { () async throws(NavigationError) in
                    try await session.run { session throws(NavigationError) in
                        let outcome = try await session.durable(try change.apply(to: session, ifMatch: ifMatch))
                        waiting.send(Self.outcomeResponse(try await session.durable(await session.waitForEffects(of: outcome, timeout: wait))))
                    }
                }
            } catch {
                fail(error, hosted, answer)
            }
        }
    }

    /// What a request asks of a session, read and checked on the request's loop before the
    /// session runs it. A value, not a closure: it travels inside the one closure that runs it.
    private enum Change: Sendable {
        case action(target: String, action: String, arguments: JSON?)
        case binding(target: String, field: String, value: JSON)
        case dismiss(presentation: String, button: String?)
        case pop(stack: String, NavigationSession.PopRequest)
        case push(target: String, value: JSON)
        case state(JSON)

        func apply(to session: isolated NavigationSession, ifMatch: Int?) throws(NavigationError) -> NavigationSession.Outcome {
            switch self {
            case .action(let target, let action, let arguments):
                try session.perform(target: target, action: action, arguments: arguments, ifMatch: ifMatch)
            case .binding(let target, let field, let value):
                try session.bind(target: target, field: field, value: value, ifMatch: ifMatch)
            case .dismiss(let presentation, let button):
                try session.dismiss(presentation: presentation, button: button, ifMatch: ifMatch)
            case .pop(let stack, let request):
                try session.pop(stack: stack, request, ifMatch: ifMatch)
            case .push(let target, let value):
                try session.push(from: target, value: value, ifMatch: ifMatch)
            case .state(let state):
                // A deep link starts no work: what its state says is under way settles as it
                // lands, as at creation with a state and after a restart.
                try session.replaceState(state, ifMatch: ifMatch)
            }
        }
    }

    private static func change(_ route: Route, _ parameters: [String], _ request: HTTPRequest) throws(APIError) -> Change {
        switch route {
        case .actions:
            let body = try RequestBody.object(request, allowed: ["target", "action", "args"])
            return .action(target: try RequestBody.optionalString(body, "target") ?? "root",
                           action: try RequestBody.string(body, "action"), arguments: body["args"])
        case .binding:
            guard let value = try RequestBody.json(request) else { throw APIError(400, "missing_body", "send the new value as the JSON body") }
            return .binding(target: parameters[1], field: parameters[2], value: value)
        case .dismiss:
            let body = try RequestBody.object(request, allowed: ["button"], required: false)
            return .dismiss(presentation: parameters[1], button: try RequestBody.optionalString(body, "button"))
        case .pop:
            // An empty body is the Back button: one screen.
            let body = try RequestBody.object(request, allowed: ["count", "to"], required: false)
            switch (body["count"], body["to"]) {
            case (.int(let count)?, nil): return .pop(stack: parameters[1], .count(count))
            // An integer too large for a count is still more elements than any stack has.
            case (.double(let count)?, nil) where count.rounded() == count && count.magnitude >= 0x1p63:
                return .pop(stack: parameters[1], .count(count < 0 ? .min : .max))
            case (nil, .string(let element)?): return .pop(stack: parameters[1], .to(element))
            case (nil, nil): return .pop(stack: parameters[1], .count(1))
            case (.some, .some): throw APIError.invalidBody("body", "give either count or to, not both")
            case (let count?, nil): throw APIError.invalidBody("body.count", "expected an integer, found \(count.typeName)")
            case (nil, let to?): throw APIError.invalidBody("body.to", "expected an element id string, found \(to.typeName)")
            }
        case .push:
            let body = try RequestBody.object(request, allowed: ["value"])
            guard let value = body["value"] else { throw APIError.invalidBody("body.value", "missing; expected a path value such as {\"settings\":{}}") }
            return .push(target: parameters[1], value: value)
        case .state:
            let body = try RequestBody.object(request, allowed: ["state"])
            guard let state = body["state"] else { throw APIError.invalidBody("body.state", "missing; expected the feature's state") }
            return .state(state)
        default:
            throw APIError(404, "not_found", "no such endpoint")
        }
    }

    /// Answers a change that did not happen.
    private func fail(_ error: NavigationError, _ hosted: HostedSession, _ answer: Answer) {
        if lifecycle.isShuttingDown {
            // A session the shutdown just ended or suspended is not gone: try again later.
            answer.fail(.shuttingDown)
        } else if hosted.hadCommitUnsettled {
            // Its commit was cut off: it may be stored. The session is read again from the store
            // by the next request, which the client should make a read before sending it again.
            answer.fail(.commitUnsettled)
        } else if hosted.epoch != nil, store.session(hosted.id) !== hosted || hosted.isLetGo {
            // Another node took it over, or deleted it, and this write was fenced off: nothing
            // changed, and this node answers as for a session it never had.
            answer.fail(.unknownSession(hosted.id))
        } else {
            answer.fail(APIError(error))
        }
    }

    static func outcomeResponse(_ outcome: NavigationSession.Outcome) -> HTTPResponse {
        .json(status: 200, outcomeBody(outcome), headers: ["ETag": "\"\(outcome.version)\""])
    }

    /// Sends every batch of the session to its open streams; closes them when a failed write
    /// rolled the session back, so clients resume from what is durable.
    func attachEvents(_ hosted: HostedSession) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            hosted.navigation.isolated { session in
                Self.attachEvents(hosted, to: session)
                done.resume()
            }
        }
    }

    /// `attachEvents` on the session's executor, in place (recovery wires many at once).
    static func attachEvents(_ hosted: HostedSession, to session: isolated NavigationSession) {
        let events = hosted.events
        session.onEvents { events.publish($0) }
        // Weakly: the session holds this handler, and the hosted session holds the session.
        session.onRollback { [weak hosted] in
            // A write refused because the session was let go: closing (or `end`) is the
            // letting go's to do; a deletion's `end` must not be lost to a close without it.
            if hosted?.isLetGo != true { events.closeAll() }
        }
    }

    static func wallClock() -> Double {
        secondsSince1970()
    }

    /// `{"version":n,"events":[{"id","event","data"}…]}`, reusing each event's encoded data, and
    /// `"effectsPending":true` when a wait for the request's effects ran out before they ended.
    static func outcomeBody(_ outcome: NavigationSession.Outcome) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(outcome.events.reduce(32) { $0 + $1.encodedData.count + 48 })
        bytes.append(contentsOf: #"{"version":"#.utf8)
        JSONWriter.writeInt(outcome.version, into: &bytes)
        bytes.append(contentsOf: #","events":["#.utf8)
        for (index, event) in outcome.events.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #"{"id":"#.utf8)
            JSONWriter.writeInt(event.sequence, into: &bytes)
            bytes.append(contentsOf: #","event":""#.utf8)
            bytes.append(contentsOf: event.kind.rawValue.utf8)
            bytes.append(contentsOf: #"","data":"#.utf8)
            bytes.append(contentsOf: event.encodedData)
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "]"))
        if outcome.effectsPending { bytes.append(contentsOf: #","effectsPending":true"#.utf8) }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// `If-Match: "5"` (also `W/"5"` or `5`); `*` matches any version. Anything else is 400; a
    /// version too large to be one this server ever issued simply does not match (412).
    static func ifMatch(_ request: HTTPRequest) throws(APIError) -> Int? {
        let fields = request.headers.values("If-Match")
        guard let header = fields.first else { return nil }
        // Several fields make a list (RFC 9110 5.3), which a version check has no use for,
        // as on one line: refused, not decided by whichever came first.
        guard fields.count == 1 else {
            throw APIError(400, "bad_if_match", "If-Match must be * or a single version such as \"3\", not \(fields.count) fields")
        }
        var tag = header.trimmingSpaces
        if tag == "*" { return nil }
        if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
        if tag.count >= 2, tag.first == "\"", tag.last == "\"" { tag = tag.dropFirst().dropLast() }
        guard tag.isDecimalDigits else {
            throw APIError(400, "bad_if_match", "If-Match must be * or a version such as \"3\", not \(header)")
        }
        // Tags compare as strings (RFC 9110 8.8.3.2): "04" is not the tag of version 4.
        guard tag.count == 1 || tag.first != "0" else {
            throw APIError(412, "version_mismatch", "no version this server issues is written \(tag)")
        }
        // Too large for any version this server issues: it cannot match, and the answer names
        // what was sent rather than a number it was clamped to.
        guard let version = Int(tag) else {
            throw APIError(412, "version_mismatch", "version \(tag) is beyond any this server issues")
        }
        return version
    }

    /// The query parameters navd reads. Each is read once, so a second copy would be decided by
    /// whichever came first: a request that sends one twice is refused before anything happens.
    static let queryParameters = ["wait", "timeout", "token", "ticket", "lastEventId"]

    static func refuseRepeatedParameters(_ request: HTTPRequest) throws(APIError) {
        guard request.query.count > 1 else { return }
        for name in queryParameters where request.query.count(where: { $0.name == name }) > 1 {
            throw APIError(400, "bad_query", "\(name) is given more than once")
        }
    }

    /// `?wait=true` waits for the effects the request started (at most `timeout`, or `?timeout=` seconds).
    static func wait(_ request: HTTPRequest, limit: Duration) throws(APIError) -> Duration? {
        // `timeout` is checked even without `wait`: a malformed query is refused, never ignored.
        var timeout = limit
        if let text = request.queryValue("timeout") {
            let isDecimal = text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || ".eE+-".utf8.contains($0) }
            guard isDecimal, let seconds = Double(text), seconds > 0, seconds <= 60 else {
                throw APIError(400, "bad_query", "timeout must be a number of seconds over 0 and at most 60, not \(text)")
            }
            timeout = .milliseconds(Int(seconds * 1000))
        }
        guard let wait = request.queryValue("wait") else { return nil }
        switch wait {
        case "true", "1", "": return timeout
        case "false", "0": return nil
        default: throw APIError(400, "bad_query", "wait must be true or false, not \(wait)")
        }
    }

    // MARK: - Event stream

    /// `Last-Event-ID` (or `?lastEventId=`): an id is decimal digits, with spaces around them
    /// at most. Anything else (`1 5`, `+5`, `-0`) is no id this session issued, -1, which gets
    /// a fresh snapshot rather than a resumption from a place the client never was.
    static func lastEventID(_ request: HTTPRequest) -> Int? {
        let fields = request.headers.values("Last-Event-ID")
        // Two ids name no one place to resume from: a fresh snapshot, as for an id never issued.
        guard fields.count <= 1 else { return -1 }
        guard let text = fields.first ?? request.queryValue("lastEventId") else { return nil }
        let digits = text.trimmingSpaces
        guard digits.isDecimalDigits, let id = Int(digits) else { return -1 }
        return id
    }

    private func openStream(_ hosted: HostedSession, _ request: HTTPRequest, _ answer: Answer) throws(APIError) {
        guard !lifecycle.isShuttingDown else { throw .shuttingDown }
        let lastEventID = Self.lastEventID(request)
        var headers: HTTPHeaders = ["Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"]
        for (name, value) in configuration.cors.responseHeaders(origin: CORSPolicy.origin(of: request)) { headers.set(name, value) }
        // HEAD describes the stream without opening one, so the connection stays usable.
        if request.method == "HEAD" {
            var head = HTTPResponse(status: 200, headers: headers)
            head.describesEventStream = true
            return answer.send(head)
        }
        let stream = answer.startStream(headers: headers)
        let opened = ContinuousClock.now
        let tally = StreamTally()
        metrics.streamOpened()
        let (events, metrics, log, lifecycle) = (hosted.events, metrics, log, lifecycle)
        // The close handler lives as long as the stream: it keeps what its log line needs, not
        // the answer (its responder and request), which would cost every idle stream their bytes.
        let logged = log.logsRequests ? (requestID: answer.requestID, remote: answer.remoteAddress) : nil
        stream.onClose { reason in
            // Used until now: touched before the stream stops counting, so the reaper never
            // sees neither and expires a session whose client is about to reconnect.
            hosted.touch()
            events.remove(stream)
            metrics.streamClosed()
            if reason == .tooSlow { metrics.subscriberDropped() }
            guard let logged else { return }
            log.streamClosed(.init(requestID: logged.requestID, remote: logged.remote, session: hosted.id,
                                   reason: tally.reason(reason, shuttingDown: lifecycle.isShuttingDown),
                                   seconds: (ContinuousClock.now - opened).inSeconds, events: tally.events, bytes: tally.bytes))
        }
        hosted.navigation.isolated { session in
            // A client that hung up while its request waited costs no snapshot.
            guard stream.isOpen else { return }
            session.attach(after: lastEventID, replayLimit: stream.bufferLimit) { start, through in
                var first = ServerSentEvents.preamble
                switch start {
                case .resume(let missed):
                    first += ServerSentEvents.frames(missed)
                    events.add(stream, first: first, events: missed.count, through: through, tally: tally)
                    // Attached after the takeover's last close: closed now, to reconnect elsewhere.
                    if hosted.livesOnElsewhere { stream.close() }
                case .snapshot(let snapshot):
                    ServerSentEvents.append(snapshot, to: &first)
                    events.add(stream, first: first, events: 1, through: through, tally: tally)
                    if hosted.livesOnElsewhere { stream.close() }
                case .ended(let end):
                    // Deleted while this request was on its way: say so, and close.
                    ServerSentEvents.append(end, to: &first)
                    if stream.send(first) { tally.sent(events: 1, bytes: first.count, end: true) }
                    stream.close()
                }
            }
        }
    }

    // MARK: - CORS

    private func allowed(_ route: Route) -> String {
        (route.methods + ["OPTIONS"]).joined(separator: ", ")
    }

    /// The CORS headers (when the page's origin is allowed) come on top, as on every answer.
    private func preflight(_ route: Route, origin: String?) -> HTTPResponse {
        var response = HTTPResponse(status: 204, headers: ["Allow": allowed(route)])
        for (name, value) in configuration.cors.preflightHeaders(origin: origin, methods: allowed(route)) {
            response.headers.set(name, value)
        }
        return response
    }
}
