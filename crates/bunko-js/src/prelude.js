// The host side of a sandbox, evaluated once in the main realm of each QuickJS runtime.
// It defines the frozen, non-writable global `__bunko_host` whose functions Rust calls
// (see sandbox.rs). User code runs in other realms but can reach this one (through
// `emit.constructor`, for instance); it can call these functions but not replace them,
// and it never sees the `tick` callback Rust passes in, which is strict-mode local here
// and is refused by Rust past one call per document anyway.
//
// Behaviour follows CouchDB 3.4's JavaScript query server (share/server/views.js, util.js,
// state.js, dispatch-quickjs.js); the comments name the rule each piece reproduces.
(function () {
  "use strict";
  // Builtins are captured now so that user code patching the main realm's prototypes
  // (reachable through e.g. `emit.constructor`) cannot change how the host works.
  var parse = JSON.parse;
  var stringify = JSON.stringify;
  var freeze = Object.freeze;
  var preventExtensions = Object.preventExtensions;
  var apply = Reflect.apply;
  var objectToString = Object.prototype.toString;
  var hasOwnProperty = Object.prototype.hasOwnProperty;
  var toStr = String;

  var funs = [];    // compiled functions, by id
  var rows = [];    // emit() buffer of the map function running now
  var logs = [];    // log() buffer of the current document or reduction
  var root = null;  // {views: {lib: ...}}: what require() resolves against
  var db = null;    // the `db` object of procedures and triggers (makeDb)
  var page = null;  // the show or list response being built (render.js); null otherwise

  // util.js error_to_json: an Error-like value becomes {error, message}.
  function errorToJson(e) {
    if (typeof e === "object" && e !== null && "stack" in e && "name" in e && "message" in e) {
      return { error: e.name, message: e.message };
    }
    return e;
  }

  // util.js errstr: QuickJS has no toSource, so it is toString().
  function errstr(e) {
    try {
      return toStr(e.toString());
    } catch (_) {
      return toStr(e);
    }
  }

  function emit(key, value) {
    rows[rows.length] = [key, errorToJson(value)];
  }

  // views.js sum: for-in over whatever is passed, `+=` from 0.
  function sum(values) {
    var rv = 0;
    for (var i in values) {
      rv += values[i];
    }
    return rv;
  }

  function log(message) {
    if (typeof message !== "string") {
      message = stringify(errorToJson(message));
    }
    logs[logs.length] = toStr(message);
  }

  function isArray(obj) {
    return apply(objectToString, obj, []) === "[object Array]";
  }

  function pathError(message) {
    return ["error", "invalid_require_path", message];
  }

  // util.js resolveModule: walks `names` from the requiring module's directory (`mod`),
  // or from the design document root for a path not starting with `.` or `..`.
  function resolve(names, mod, from) {
    if (names.length === 0) {
      if (typeof mod.current !== "string") {
        throw pathError("Must require a JavaScript string, not: " + typeof mod.current);
      }
      return { current: mod.current, parent: mod.parent, id: mod.id, exports: {} };
    }
    var n = names.shift();
    if (n === "..") {
      if (!(mod && mod.parent && mod.parent.parent)) {
        throw pathError("Object has no parent " + stringify(mod && mod.current));
      }
      return resolve(names, {
        id: mod.id.slice(0, mod.id.lastIndexOf("/")),
        parent: mod.parent.parent,
        current: mod.parent.current,
      });
    }
    if (n === ".") {
      if (!(mod && mod.parent)) {
        throw pathError("Object has no parent " + stringify(mod && mod.current));
      }
      return resolve(names, { parent: mod.parent, current: mod.current, id: mod.id });
    }
    if (from) mod = { current: from };
    if (mod.current[n] === undefined) {
      throw pathError('Object has no property "' + n + '". ' + stringify(mod.current));
    }
    return resolve(names, { current: mod.current[n], parent: mod, id: mod.id ? mod.id + "/" + n : n });
  }

  // util.js Couch.compileFunction's require: CommonJS modules from views.lib, cached per
  // map function by module id, evaluated in that function's realm.
  function makeRequire(global) {
    var cache = {};
    var sandboxEval = global.eval;
    var ddoc = root === null ? { views: { lib: null } } : root;
    function requireFrom(name, module) {
      var m = resolve(toStr(name).split("/"), module === undefined ? undefined : module.parent, ddoc);
      if (!apply(hasOwnProperty, cache, [m.id])) {
        // An empty exports object first, so circular requires terminate.
        cache[m.id] = {};
        var source = "(function (module, exports, require) { " + m.current + "\n });";
        try {
          var fn = sandboxEval(source);
          apply(fn, global, [m, m.exports, function (n) { return requireFrom(n, m); }]);
        } catch (e) {
          throw ["error", "compilation_error", "Module require('" + name + "') raised error " + errstr(e)];
        }
        cache[m.id] = m.exports;
      }
      return cache[m.id];
    }
    return function require(name) {
      return requireFrom(name, undefined);
    };
  }

  // views.js handleViewError: which exceptions stop the whole call instead of skipping
  // one document. Rust reads ["fatal", error, reason] arrays and InternalErrors. QuickJS
  // throws null when it cannot even allocate its "out of memory" error (CouchDB fails the
  // call there too, in handleError). A stack overflow is an InternalError in CouchDB's
  // QuickJS and a RangeError in rquickjs's, so it is rethrown as fatal explicitly.
  function rethrowFatal(err) {
    if (err === "fatal_error") {
      throw ["fatal", "map_runtime_error", "function raised 'fatal_error'"];
    }
    if (err === null || err === undefined) throw err;
    if (err[0] == "fatal") throw err;
    if (err.name == "InternalError") throw err;
    if (err.name == "RangeError" && err.message == "Maximum call stack size exceeded") {
      throw ["fatal", "InternalError", "stack overflow"];
    }
  }

  // One document through every map function: "[[rows per function],[errors],[logs]]".
  // The document arrives deep-frozen (views.js mapDoc seals it so that one map function
  // cannot change what the next one sees); Rust builds it that way (convert.rs).
  function mapOne(ids, doc) {
    logs = [];
    var out = "[[";
    var errors = [];
    for (var i = 0; i < ids.length; i++) {
      rows = [];
      var text;
      try {
        // Called through a local, so `this` is the function's own global, not `funs`.
        var fun = funs[ids[i]];
        fun(doc);
        text = stringify(rows);
      } catch (err) {
        rethrowFatal(err);
        errors[errors.length] = [i, "function raised exception " + errstr(err) + " with doc._id " + doc._id];
        text = "[]";
      }
      out += (i === 0 ? "" : ",") + text;
    }
    rows = [];
    out += errors.length === 0 ? "],[]," : "]," + stringify(errors) + ",";
    return out + (logs.length === 0 ? "[]]" : stringify(logs) + "]");
  }

  // render.js Mime: format names and their media types. The last registration of a name
  // wins; the defaults are CouchDB's.
  var mimesByName = {};
  var nameByMime = {};
  function registerType(name) {
    var types = [];
    for (var i = 1; i < arguments.length; i++) types[types.length] = toStr(arguments[i]);
    mimesByName[name] = types;
    for (var j = 0; j < types.length; j++) nameByMime[types[j]] = name;
  }
  registerType("all", "*/*");
  registerType("text", "text/plain; charset=utf-8", "txt");
  registerType("html", "text/html; charset=utf-8");
  registerType("xhtml", "application/xhtml+xml", "xhtml");
  registerType("xml", "application/xml", "text/xml", "application/x-xml");
  registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
  registerType("css", "text/css");
  registerType("ics", "text/calendar");
  registerType("csv", "text/csv");
  registerType("rss", "application/rss+xml");
  registerType("atom", "application/atom+xml");
  registerType("yaml", "application/x-yaml", "text/yaml");
  registerType("multipart_form", "multipart/form-data");
  registerType("url_encoded_form", "application/x-www-form-urlencoded");
  registerType("json", "application/json", "text/x-json");

  // render.js start/send/getRow/provides, on the page being rendered.
  function start(resp) {
    if (page !== null) page.start = resp || {};
  }
  function send(chunk) {
    if (page !== null) page.chunks[page.chunks.length] = toStr(chunk);
  }
  function getRow() {
    if (page === null || page.rows === null || page.next >= page.rows.length) return null;
    return page.rows[page.next++];
  }
  function provides(name, fun) {
    if (page !== null) page.provides[page.provides.length] = [toStr(name), fun];
  }

  // mimeparse.js: "type/subtype; q=0.5" as [type, subtype, params].
  function parseRange(text) {
    var parts = toStr(text).split(";");
    var full = parts[0].trim();
    if (full === "*") full = "*/*";
    var slash = full.indexOf("/");
    var params = {};
    for (var i = 1; i < parts.length; i++) {
      var eq = parts[i].indexOf("=");
      if (eq > 0) params[parts[i].slice(0, eq).trim()] = parts[i].slice(eq + 1).trim();
    }
    var q = parseFloat(params.q);
    params.q = isNaN(q) || q < 0 || q > 1 ? 1 : q;
    return [slash < 0 ? full : full.slice(0, slash), slash < 0 ? "*" : full.slice(slash + 1), params];
  }

  // mimeparse.js bestMatch: the supported type the Accept header ranks best (most
  // specific matching range, then its q; later types win ties); "" when none is acceptable.
  function bestMatch(supported, header) {
    var ranges = toStr(header).split(",").map(parseRange);
    var best = "", bestFit = -1, bestQ = 0;
    for (var s = 0; s < supported.length; s++) {
      var mime = parseRange(supported[s]);
      var fit = -1, q = 0;
      for (var r = 0; r < ranges.length; r++) {
        var range = ranges[r];
        var typeOk = range[0] === mime[0] || range[0] === "*" || mime[0] === "*";
        var subOk = range[1] === mime[1] || range[1] === "*" || mime[1] === "*";
        if (!typeOk || !subOk) continue;
        var f = (range[0] === mime[0] ? 100 : 0) + (range[1] === mime[1] ? 10 : 0);
        for (var k in mime[2]) if (k !== "q" && range[2][k] === mime[2][k]) f += 1;
        if (f > fit) {
          fit = f;
          q = range[2].q;
        }
      }
      if (q > 0 && (fit > bestFit || (fit === bestFit && q >= bestQ))) {
        best = supported[s];
        bestFit = fit;
        bestQ = q;
      }
    }
    return best;
  }

  // render.js runProvides: the provides() function the request asks for, by ?format=,
  // the Accept header, or the first registered; its result.
  function runProvides(req, ddoc) {
    var offered = page.provides;
    var name = null;
    var accept = req && req.headers ? req.headers["Accept"] : undefined;
    if (req && req.query && req.query.format) {
      name = toStr(req.query.format);
      page.type = mimesByName[name] ? mimesByName[name][0] : null;
    } else if (accept) {
      var supported = [];
      for (var i = offered.length - 1; i >= 0; i--) {
        if (mimesByName[offered[i][0]]) supported = supported.concat(mimesByName[offered[i][0]]);
      }
      page.type = bestMatch(supported, accept);
      name = nameByMime[page.type] || null;
    } else {
      name = offered[0][0];
      page.type = mimesByName[name] ? mimesByName[name][0] : null;
    }
    for (var j = 0; j < offered.length; j++) {
      if (offered[j][0] === name) return apply(offered[j][1], ddoc, []);
    }
    var names = offered.map(function (o) {
      return (mimesByName[o[0]] || []).join(", ") || o[0];
    });
    throw ["error", "not_acceptable",
      "Content-Type " + (accept || name) + " not supported, try one of: " + names.join(", ")];
  }

  // render.js renderError: ["error", name, reason] and {error, reason} pass through, a
  // document path with no document is not_found, anything else is render_error.
  function renderFailure(err, missingDoc) {
    rethrowFatal(err);
    var out;
    if (missingDoc) {
      out = ["not_found", "document not found"];
    } else if (err && err.error && err.reason) {
      out = [toStr(err.error), toStr(err.reason)];
    } else if (err && err[0] == "error") {
      out = [toStr(err[1]), toStr(err[2])];
    } else {
      out = ["render_error", "function raised error: " + errstr(err) + " \nstacktrace: " + (err && err.stack)];
    }
    return stringify([1, out]);
  }

  function asResponse(resp) {
    return typeof resp === "string" ? { body: resp } : resp;
  }

  var host = {
    // Makes `global` (a new realm's global object) a CouchDB sandbox (dispatch-quickjs.js
    // create_sandbox); map functions also get require().
    adopt: function (global, withRequire) {
      global.emit = emit;
      global.sum = sum;
      global.log = log;
      global.toJSON = stringify;
      global.isArray = isArray;
      global.start = start;
      global.send = send;
      global.getRow = getRow;
      global.provides = provides;
      global.registerType = registerType;
      if (withRequire) global.require = makeRequire(global);
    },
    setLib: function (text) {
      root = { views: { lib: parse(text) } };
    },
    setRoot: function (text) {
      root = parse(text);
    },
    register: function (fn) {
      funs[funs.length] = fn;
      return funs.length - 1;
    },
    takeLogs: function () {
      var out = stringify(logs);
      logs = [];
      return out;
    },
    // Used by convert.rs to build frozen documents.
    freeze: freeze,
    preventExtensions: preventExtensions,
    // `docs` is an array of frozen documents; `tick` restarts the time limit per document.
    mapDocs: function (ids, docs, tick) {
      var out = "[";
      for (var d = 0; d < docs.length; d++) {
        tick();
        out += (d === 0 ? "" : ",") + mapOne(ids, docs[d]);
      }
      return out + "]";
    },
    // validate.js: one validate_doc_update function called with `ddoc` as `this`.
    // "1" when it returns; the JSON of what it threw otherwise. A real Error (with a name
    // and a stack) is rethrown, as the query server dies on it.
    validate: function (id, text, tick) {
      tick();
      var args = parse(text);
      try {
        apply(funs[id], args[4], [args[0], args[1], args[2], args[3]]);
        return "1";
      } catch (err) {
        rethrowFatal(err);
        if (err && err.name && err.stack) throw err;
        var out = stringify(err);
        return out === undefined ? "null" : out;
      }
    },
    // Procedures and triggers (script.rs). `makeDb` builds, once per runtime, the `db`
    // object user code gets; each raw function takes and returns JSON text, the answer
    // being {"ok": value} or {"error": name, "reason": text}, which is thrown.
    makeDb: function (rawGet, rawFind, rawPut) {
      if (db !== null) return;
      function call(raw, arg) {
        var answer = parse(raw(stringify(arg)));
        if (apply(hasOwnProperty, answer, ["error"])) {
          throw { error: answer.error, reason: answer.reason };
        }
        return answer.ok;
      }
      db = freeze({
        get: function (id) {
          return call(rawGet, toStr(id));
        },
        find: function (selector, options) {
          return call(rawFind, { selector: selector, options: options === undefined ? null : options });
        },
        put: function (doc) {
          return call(rawPut, doc);
        },
        remove: function (doc) {
          return call(rawPut, { _id: doc._id, _rev: doc._rev, _deleted: true });
        },
      });
    },
    // One procedure or trigger: `text` is [ddoc, args]; `db` goes in at position `dbAt`
    // and the design document is `this`. "[0,result]" when it returns, "[1,thrown]" when
    // it throws; a real Error is thrown as {error: name, reason: message}.
    script: function (id, text, dbAt, tick) {
      tick();
      var call = parse(text);
      var given = call[1];
      var args = [];
      for (var i = 0, j = 0; i <= given.length; i++) {
        if (i === dbAt) args[i] = db;
        else args[i] = given[j++];
      }
      try {
        var out = stringify(apply(funs[id], call[0], args));
        return "[0," + (out === undefined ? "null" : out) + "]";
      } catch (err) {
        rethrowFatal(err);
        if (err && err.name !== undefined && err.stack !== undefined) {
          err = { error: toStr(err.name), reason: toStr(err.message) };
        }
        var thrown = stringify(err);
        return "[1," + (thrown === undefined ? "null" : thrown) + "]";
      }
    },
    // render.js runShow: `text` is [ddoc, doc, req]. "[0,response]" or "[1,[error,reason]]".
    show: function (id, text, tick) {
      tick();
      var call = parse(text);
      page = { chunks: [], start: {}, rows: null, next: 0, provides: [], type: null };
      try {
        var resp = asResponse(apply(funs[id], call[0], [call[1], call[2]]) || {});
        if (page.chunks.length > 0) {
          resp.headers = resp.headers || {};
          for (var h in page.start) resp.headers[h] = page.start[h];
          resp.body = page.chunks.join("") + (resp.body || "");
          page.chunks = [];
        }
        if (page.provides.length > 0) {
          var provided = asResponse(runProvides(call[2], call[0]) || {});
          resp.body = (resp.body || "") + page.chunks.join("") + (provided.body || "");
          resp.headers = resp.headers || {};
          if (page.type) resp.headers["Content-Type"] = resp.headers["Content-Type"] || page.type;
        }
        if (typeof resp !== "object" || resp === null || isArray(resp)) {
          throw ["error", "render_error", "undefined response from show function"];
        }
        return stringify([0, resp]);
      } catch (err) {
        var path = call[2] && call[2].path;
        return renderFailure(err, call[1] === null && path && path.length > 5);
      } finally {
        page = null;
      }
    },
    // render.js runRewrite: `text` is [ddoc, req]. "[0,rule]" (a string is its path),
    // "[0,null]" when it returns nothing (no_dispatch_rule), or "[1,[error,reason]]".
    rewrite: function (id, text, tick) {
      tick();
      var call = parse(text);
      try {
        var rule = apply(funs[id], call[0], [call[1]]);
        if (!rule) return "[0,null]";
        if (typeof rule === "string") rule = { path: rule };
        return stringify([0, rule]);
      } catch (err) {
        return renderFailure(err, false);
      }
    },
    // render.js runList: `text` is [ddoc, head, req, rows]; getRow() hands out the rows.
    // "[0,{code, headers, body}]" (the chunks sent and the returned tail) or
    // "[1,[error,reason]]".
    list: function (id, text, tick) {
      tick();
      var call = parse(text);
      page = { chunks: [], start: {}, rows: call[3], next: 0, provides: [], type: null };
      try {
        var tail = apply(funs[id], call[0], [call[1], call[2]]);
        if (page.provides.length > 0) tail = runProvides(call[2], call[0]);
        if (tail !== undefined) page.chunks[page.chunks.length] = toStr(tail);
        var headers = page.start.headers || {};
        if (page.type && !headers["Content-Type"]) headers["Content-Type"] = page.type;
        var out = { headers: headers, body: page.chunks.join("") };
        if (page.start.code !== undefined) out.code = page.start.code;
        return stringify([0, out]);
      } catch (err) {
        return renderFailure(err, false);
      } finally {
        page = null;
      }
    },
    // views.js runReduce for one function: "[[result],error,[logs]]". `text` is
    // [[[key, id], value], ...] for a reduce and [value, ...] for a rereduce.
    reduce: function (id, text, rereduce, tick) {
      tick();
      var input = parse(text);
      var keyList = null;
      var values = input;
      if (!rereduce) {
        keyList = new Array(input.length);
        values = new Array(input.length);
        for (var i = 0; i < input.length; i++) {
          keyList[i] = input[i][0];
          values[i] = input[i][1];
        }
      }
      logs = [];
      var result;
      var error = null;
      try {
        var fun = funs[id];
        result = stringify([fun(keyList, values, rereduce)]);
      } catch (err) {
        rethrowFatal(err);
        error = "function raised exception " + errstr(err);
        result = "[null]";
      }
      return "[" + result + "," + stringify(error) + "," + stringify(logs) + "]";
    },
  };
  Object.defineProperty(globalThis, "__bunko_host", { value: freeze(host) });
})();
