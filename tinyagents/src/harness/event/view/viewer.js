// The tinyagents run viewer: builds a timeline from a run's events (a
// recorded run embedded in the page, or a live SSE stream) and renders only
// the rows in view. Every text from the run goes through textContent or
// createTextNode, never innerHTML: a run's text is model- and tool-controlled.
(function () {
  'use strict';
  var errors = document.getElementById('js-errors');
  function reportError(text) {
    var li = document.createElement('li');
    li.textContent = text;
    errors.appendChild(li);
    document.body.setAttribute('data-js-errors', String(errors.children.length));
  }
  window.addEventListener('error', function (e) {
    reportError('error: ' + e.message + ' (line ' + e.lineno + ':' + e.colno + ')');
  });
  window.addEventListener('unhandledrejection', function (e) {
    reportError('unhandled rejection: ' + String(e.reason));
  });

  var ROW_H = 22;
  var OVERSCAN = 10;
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function ms(us) { return (us / 1000).toFixed(us < 10000 ? 2 : 0) + ' ms'; }
  function str(v) { return v === null || v === undefined ? '' : String(v); }
  // a price in USD: six decimals below a cent, four above
  function usd(v) { return '$' + v.toFixed(v < 0.01 ? 6 : 4); }

  // ---- the model: nodes built from events ---------------------------------
  var M;
  function reset() {
    M = {
      nodes: [], roots: [], runs: {}, byKey: {}, seq: 0,
      tStart: null, tEnd: 0, turns: {}, series: [], totals: { input: 0, output: 0, model: 0, tool: 0, usd: 0, unpriced: 0 },
      middlewares: {}, tools: {}, outcomes: {}, dirty: true,
    };
  }
  reset();

  function node(kind, label, parent, t, extra) {
    var n = {
      id: kind + '-' + (M.seq++), kind: kind, label: label, parent: parent, children: [],
      depth: parent ? parent.depth + 1 : 0, t0: t, t1: null, outcome: 'running', detail: {},
      open: true,
    };
    for (var k in extra) n[k] = extra[k];
    if (parent) parent.children.push(n); else M.roots.push(n);
    M.nodes.push(n);
    M.dirty = true;
    return n;
  }
  function marker(kind, label, parent, t, outcome, detail) {
    var n = node(kind, label, parent, t, {});
    n.t1 = t; n.outcome = outcome; n.detail = detail || {};
    n.open = false;
    M.outcomes[outcome] = true;
    return n;
  }
  function close(n, t, outcome) {
    n.t1 = t;
    n.outcome = outcome;
    M.outcomes[outcome] = true;
    M.dirty = true;
  }
  function runState(runId) {
    var rs = M.runs[runId];
    if (!rs) {
      // events of a run whose start was not seen (a log cut at the front)
      var n = node('run', 'run ' + str(runId), null, M.tEnd, { runId: runId });
      rs = M.runs[runId] = { node: n, stack: [n], attempts: {}, refusals: [], pendingJump: null };
    }
    return rs;
  }
  function top(rs) { return rs.stack[rs.stack.length - 1]; }
  function popTo(rs, n, t) {
    var i = rs.stack.lastIndexOf(n);
    if (i < 0) return;
    while (rs.stack.length > i + 1) {
      var lost = rs.stack.pop();
      if (lost.t1 === null) close(lost, t, 'cancelled');
    }
    rs.stack.pop();
  }
  function innermostOpen(rs, kind) {
    for (var i = rs.stack.length - 1; i >= 0; i--) if (rs.stack[i].kind === kind) return rs.stack[i];
    return null;
  }
  // Where an event without a run id goes: the innermost open span of the latest run.
  var lastRun = null;
  function anywhere() { return lastRun ? top(lastRun) : null; }

  function hookOutcome(o, hook) {
    if (!o) return 'ok';
    if (o.status === 'ok') return 'ok';
    if (o.status === 'panicked') return 'panic';
    if (o.status === 'cancelled') return 'cancelled';
    if (o.status === 'error') {
      // a before_tool hook's error refuses the call; the run goes on
      if (hook === 'before_tool') return 'refused';
      return 'error';
    }
    return str(o.status);
  }

  function ingest(rec) {
    var e = rec.event, t = rec.t_us;
    if (!e || typeof e !== 'object') return;
    if (M.tStart === null) M.tStart = t;
    if (t > M.tEnd) M.tEnd = t;
    var hasRun = e.run_id !== undefined && e.run_id !== null && e.type !== 'run_started';
    var rs = hasRun ? runState(e.run_id) : lastRun;
    if (rs) lastRun = rs;
    var n;
    switch (e.type) {
      case 'run_started': {
        var parent = null;
        if (e.parent_run_id !== null && e.parent_run_id !== undefined && M.runs[e.parent_run_id]) {
          var prs = M.runs[e.parent_run_id];
          // a sub-agent's run id is `<parent run>/<call id>`: nest it under that call
          var prefix = str(e.parent_run_id) + '/';
          var call = str(e.run_id).indexOf(prefix) === 0 ? M.byKey[prefix + str(e.run_id).slice(prefix.length)] : null;
          parent = call || innermostOpen(prs, 'tool') || top(prs);
        }
        n = node('run', (parent ? 'sub-agent run ' : 'run ') + str(e.run_id), parent, t, { runId: e.run_id });
        n.detail = { run_id: e.run_id, parent_run_id: e.parent_run_id, depth: e.depth };
        M.runs[e.run_id] = { node: n, stack: [n], attempts: {}, refusals: [], pendingJump: null };
        lastRun = M.runs[e.run_id];
        break;
      }
      case 'run_completed': {
        n = rs.node;
        popTo(rs, n, t);
        rs.stack = [n];
        n.detail.error = e.error;
        close(n, t, e.error ? 'error' : 'ok');
        break;
      }
      case 'middleware_started': {
        n = node('hook', str(e.middleware) + ' · ' + str(e.hook), top(rs), t,
          { middleware: e.middleware, hook: e.hook });
        n.detail = { middleware: e.middleware, hook: e.hook };
        M.middlewares[e.middleware] = true;
        rs.stack.push(n);
        break;
      }
      case 'middleware_completed': {
        for (var i = rs.stack.length - 1; i > 0; i--) {
          var s = rs.stack[i];
          if (s.kind === 'hook' && s.middleware === e.middleware && s.hook === e.hook) { n = s; break; }
        }
        if (!n) break;
        popTo(rs, n, t);
        var oc = hookOutcome(e.outcome, e.hook);
        if (oc === 'ok' && rs.pendingJump === n) oc = 'jump';
        if (rs.pendingJump === n) rs.pendingJump = null;
        n.detail.outcome = e.outcome;
        close(n, t, oc);
        if (oc === 'refused') rs.refusals.push(n);
        break;
      }
      case 'model_call_started': {
        n = node('model', 'model call · step ' + str(e.step) + ' · attempt ' + str(e.attempt) + ' · ' + str(e.model),
          top(rs), t, { step: e.step });
        n.detail = { model: e.model, step: e.step, attempt: e.attempt, reply: '', reasoning: '', calls: [] };
        rs.attempts[e.attempt] = n;
        rs.stack.push(n);
        break;
      }
      case 'model_request': {
        // a delta against the run's previous request: its first `kept` messages, then these
        var q = e.request || {}, prev = rs.request || { messages: [], system: [], tools: [], complete: true };
        var kept = q.kept || 0;
        var req = {
          messages: prev.messages.slice(0, kept).concat(q.messages || []),
          system: q.system === null || q.system === undefined ? prev.system : q.system,
          tools: q.tools === null || q.tools === undefined ? prev.tools : q.tools,
          params: q.params, tool_choice: q.tool_choice, response_format: q.response_format,
          // a delta keeping more than the log holds (a log cut short) rebuilds a partial request
          complete: prev.complete && kept <= prev.messages.length,
        };
        rs.request = req;
        n = rs.attempts[e.attempt];
        if (n) n.detail.request = req;
        break;
      }
      case 'model_delta': {
        n = rs.attempts[e.attempt];
        var c = e.delta && e.delta.content;
        if (!n || !c) break;
        if (c.type === 'text') n.detail.reply += str(c.text);
        else if (c.type === 'reasoning') n.detail.reasoning += str(c.text);
        else if (c.type === 'tool_call') {
          var calls = n.detail.calls, idx = c.index || 0;
          if (!calls[idx]) calls[idx] = { id: '', name: '', arguments: '' };
          if (c.id) calls[idx].id = c.id;
          if (c.name) calls[idx].name = c.name;
          calls[idx].arguments += str(c.arguments);
        }
        break;
      }
      case 'model_call_completed': {
        n = rs.attempts[e.attempt];
        if (!n) break;
        popTo(rs, n, t);
        n.detail.usage = e.usage;
        n.detail.usage_reported = e.usage_reported;
        n.detail.finish_reason = e.finish_reason;
        n.detail.error = e.error;
        // the page's maker priced the call (a recorded run); a live page cannot
        var cost = rec.cost || { unknown: 'a live page does not price calls' };
        n.detail.cost = typeof cost.usd === 'number' ? usd(cost.usd) : 'cost unknown: ' + str(cost.unknown);
        close(n, t, e.error ? 'error' : 'ok');
        var u = e.usage || {};
        var key = str(e.run_id) + '#' + str(e.step);
        var turn = M.turns[key] || (M.turns[key] = { label: str(e.step), input: 0, output: 0, usd: 0, unpriced: 0, order: Object.keys(M.turns).length });
        if (typeof cost.usd === 'number') { turn.usd += cost.usd; M.totals.usd += cost.usd; }
        else { turn.unpriced += 1; M.totals.unpriced += 1; }
        var inp = (u.input_tokens || 0) + (u.cache_read_tokens || 0) + (u.cache_write_tokens || 0);
        turn.input += inp;
        turn.output += u.output_tokens || 0;
        M.totals.input += inp;
        M.totals.output += u.output_tokens || 0;
        M.totals.model += 1;
        M.series.push({ t: t, tokens: M.totals.input + M.totals.output, usd: M.totals.usd, model: M.totals.model, tool: M.totals.tool });
        break;
      }
      case 'attempt_discarded': {
        n = rs.attempts[e.attempt];
        if (n) n.detail.discarded = e.reason;
        break;
      }
      case 'tool_call_started': {
        n = node('tool', 'tool ' + str(e.tool) + ' (' + str(e.call_id) + ')', top(rs), t, { tool: e.tool });
        n.detail = { tool: e.tool, call_id: e.call_id, arguments: e.arguments, progress: '' };
        M.tools[e.tool] = true;
        M.byKey[str(e.run_id) + '/' + str(e.call_id)] = n;
        rs.stack.push(n);
        break;
      }
      case 'tool_delta': {
        var d = e.delta || {};
        n = M.byKey[str(e.run_id) + '/' + str(d.call_id)];
        if (n) n.detail.progress += typeof d.content === 'string' ? d.content : JSON.stringify(d.content);
        break;
      }
      case 'tool_call_refused': {
        // answered without running: a before_tool hook refused it or the batch review rejected it
        n = node('tool', 'tool ' + str(e.tool) + ' (' + str(e.call_id) + ')', top(rs), t, { tool: e.tool });
        n.detail = { tool: e.tool, call_id: e.call_id, result: e.reason, is_error: true };
        M.tools[e.tool] = true;
        M.byKey[str(e.run_id) + '/' + str(e.call_id)] = n;
        // a before_tool hook that failed is the refusal's author (a batch review rejection has none)
        if (rs.refusals.length) n.detail.refused_by = rs.refusals.shift().middleware;
        close(n, t, 'refused');
        M.totals.tool += 1;
        M.series.push({ t: t, tokens: M.totals.input + M.totals.output, usd: M.totals.usd, model: M.totals.model, tool: M.totals.tool });
        break;
      }
      case 'tool_call_completed': {
        n = M.byKey[str(e.run_id) + '/' + str(e.call_id)];
        if (!n) break;
        popTo(rs, n, t);
        n.detail.is_error = e.is_error;
        n.detail.result = e.content;
        close(n, t, e.is_error ? 'error' : 'ok');
        M.totals.tool += 1;
        M.series.push({ t: t, tokens: M.totals.input + M.totals.output, usd: M.totals.usd, model: M.totals.model, tool: M.totals.tool });
        break;
      }
      case 'retry':
        marker('retry', 'retry ' + str(e.target) + ': attempt ' + str(e.attempt) + '/' + str(e.max_attempts) +
          ' failed (' + str(e.error) + '), next in ' + str(e.delay_ms) + ' ms', top(rs), t, 'error', e);
        break;
      case 'fallback':
        marker('fallback', 'fallback ' + str(e.from) + ' → ' + str(e.to) + ' (' + str(e.error) + ')', top(rs), t, 'error', e);
        break;
      case 'compressed': {
        var p = e.provenance || {};
        var srcs = (p.source_message_ids || []).length + (p.source_artifact_ids || []).length;
        marker('compressed', 'compressed by ' + str(p.middleware) + ': ' + srcs + ' replaced, ' +
          str(p.original_tokens) + ' → ' + str(p.compressed_tokens) + ' tokens', top(rs), t, 'ok', p);
        break;
      }
      case 'control_applied': {
        var h = anywhere();
        marker('control', 'control ' + str(e.control) + ': ' + str(e.detail), h, t, 'jump', e);
        if (h && h.kind === 'hook' && lastRun) lastRun.pendingJump = h;
        break;
      }
      case 'custom': {
        var label = str(e.middleware) + ' · ' + str(e.name), data = e.data || {}, outc = 'ok', detail = e;
        if (e.middleware === 'pii') {
          var counts = data.counts || {}, total = 0;
          for (var k in counts) total += Number(counts[k]) || 0;
          label = 'pii: ' + total + ' redacted in ' + str(data.where);
          detail = { where: data.where, counts: counts };
        } else if (e.middleware === 'human_in_the_loop' && e.name === 'interrupt') {
          label = 'approval requested: ' + (data.requests || []).map(function (r) { return str(r.tool) + ' (' + str(r.call_id) + ')'; }).join(', ');
          outc = 'jump';
        } else if (e.middleware === 'human_in_the_loop' && e.name === 'decided') {
          label = 'decision: ' + str(data.decision) + ' ' + str(data.tool) + ' (' + str(data.call_id) + ')';
          outc = data.decision === 'reject' ? 'refused' : 'ok';
          var pending = M.decisions || (M.decisions = {});
          pending[str(data.call_id)] = data.decision;
        }
        n = marker('event', label, anywhere(), t, outc, detail);
        n.middleware = e.middleware;
        break;
      }
      default: {
        var text = e.type;
        if (e.type === 'notice') text = 'notice ' + str(e.source) + ': ' + str(e.message);
        else if (e.type === 'steering') text = 'steering ' + str(e.action) + ': ' + str(e.decision);
        else if (e.type === 'rate_limited') text = 'rate limited ' + str(e.key) + (e.rejected ? ': refused' : ': waited ' + str(e.waited_ms) + ' ms');
        else if (e.type === 'tools_filtered') text = 'tools filtered by ' + str(e.by) + ': ' + (e.excluded || []).length + ' hidden';
        else if (e.type === 'state_updated') text = 'state ' + str(e.key) + (e.by ? ' by ' + str(e.by) : '');
        else if (e.type === 'output_limit_recovery') text = 'output limit: ' + str(e.action) + ' ' + str(e.cap_before) + ' → ' + str(e.cap_after);
        else if (e.type === 'delta_suppressed') text = 'delta suppressed by ' + str(e.middleware);
        var bad = (e.type === 'notice' && e.is_error) || (e.type === 'rate_limited' && e.rejected);
        n = marker('event', text, rs ? top(rs) : anywhere(), t, bad ? 'error' : 'ok', e);
        if (e.by) n.middleware = e.by;
      }
    }
    // a decided call carries its decision
    if ((e.type === 'tool_call_started' || e.type === 'tool_call_refused') && M.decisions && M.decisions[str(e.call_id)]) {
      n.detail.decision = M.decisions[str(e.call_id)];
    }
  }

  // ---- the rows in view: folding and filters ------------------------------
  var rows = [], selected = null, filter = { q: '', mw: '', tool: '', outcome: '' };
  function matches(n) {
    if (filter.q && n.label.toLowerCase().indexOf(filter.q) < 0) return false;
    if (filter.mw && n.middleware !== filter.mw) return false;
    if (filter.tool && n.tool !== filter.tool) return false;
    if (filter.outcome && n.outcome !== filter.outcome) return false;
    return true;
  }
  function filtering() { return filter.q || filter.mw || filter.tool || filter.outcome; }
  function rebuildRows() {
    rows = [];
    var f = filtering();
    // With a filter, a row shows when it or one of its descendants matches.
    var keep = null;
    if (f) {
      keep = new Set();
      for (var i = M.nodes.length - 1; i >= 0; i--) {
        var n = M.nodes[i];
        if (matches(n) || keep.has(n)) { keep.add(n); if (n.parent) keep.add(n.parent); }
      }
    }
    var stack = M.roots.slice().reverse();
    while (stack.length) {
      var x = stack.pop();
      if (keep && !keep.has(x)) continue;
      rows.push(x);
      if (x.open || f) for (var j = x.children.length - 1; j >= 0; j--) stack.push(x.children[j]);
    }
    $('count').textContent = rows.length + ' of ' + M.nodes.length + ' rows';
    $('spacer').style.height = (rows.length * ROW_H) + 'px';
  }

  // ---- rendering: only the rows in view ------------------------------------
  var timeline = $('timeline'), spacer = $('spacer');
  var rendered = { from: -1, to: -1, count: -1 };
  function renderRows(force) {
    var h = timeline.clientHeight || 600;
    var from = Math.max(0, Math.floor(timeline.scrollTop / ROW_H) - OVERSCAN);
    var to = Math.min(rows.length, Math.ceil((timeline.scrollTop + h) / ROW_H) + OVERSCAN);
    if (!force && from === rendered.from && to === rendered.to && rows.length === rendered.count) return;
    rendered = { from: from, to: to, count: rows.length };
    var span = Math.max(1, M.tEnd - (M.tStart || 0));
    var frag = document.createDocumentFragment();
    for (var i = from; i < to; i++) {
      var n = rows[i];
      var r = el('div', 'row' + (n === selected ? ' selected' : ''));
      r.style.top = (i * ROW_H) + 'px';
      r.style.paddingLeft = (6 + n.depth * 16) + 'px';
      r.setAttribute('role', 'treeitem');
      r.setAttribute('data-id', n.id);
      r.setAttribute('data-kind', n.kind);
      r.setAttribute('data-outcome', n.outcome);
      r.setAttribute('data-depth', String(n.depth));
      r.appendChild(el('span', 'twisty', n.children.length ? (n.open || filtering() ? '▾' : '▸') : ''));
      r.appendChild(el('span', 'kind kind-' + n.kind, n.kind));
      r.appendChild(el('span', 'label', n.label));
      r.appendChild(el('span', 'outcome o-' + n.outcome, n.outcome));
      var d = n.t1 === null ? null : n.t1 - n.t0;
      r.appendChild(el('span', 'dur', d === null ? '…' : ms(d)));
      var bar = el('span', 'bar'), fill = el('i');
      var start = n.t0 - (M.tStart || 0), end = (n.t1 === null ? M.tEnd : n.t1) - (M.tStart || 0);
      fill.style.left = (100 * start / span).toFixed(2) + '%';
      fill.style.width = (100 * Math.max(0, end - start) / span).toFixed(2) + '%';
      bar.appendChild(fill);
      r.appendChild(bar);
      frag.appendChild(r);
    }
    spacer.replaceChildren(frag);
  }
  timeline.addEventListener('scroll', function () { requestAnimationFrame(function () { renderRows(false); }); });
  window.addEventListener('resize', function () { renderRows(true); });
  timeline.addEventListener('click', function (ev) {
    var r = ev.target.closest('.row');
    if (!r) return;
    var n = M.nodes.find(function (x) { return x.id === r.getAttribute('data-id'); });
    if (!n) return;
    if (ev.target.classList.contains('twisty') && n.children.length) { n.open = !n.open; refresh(); }
    select(n);
  });

  // ---- details -------------------------------------------------------------
  function dl(pairs) {
    var d = el('dl');
    pairs.forEach(function (p) {
      if (p[1] === undefined) return;
      d.appendChild(el('dt', null, p[0]));
      var dd = el('dd', null, typeof p[1] === 'object' && p[1] !== null ? JSON.stringify(p[1]) : str(p[1]));
      dd.setAttribute('data-field', p[0]);
      d.appendChild(dd);
    });
    return d;
  }
  function pre(title, text, field) {
    var f = document.createDocumentFragment();
    f.appendChild(el('h3', null, title));
    var p = el('pre', null, text);
    p.setAttribute('data-field', field);
    f.appendChild(p);
    return f;
  }
  function pretty(v) {
    if (typeof v === 'string') { try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; } }
    return JSON.stringify(v, null, 2);
  }
  function partText(p) {
    if (p && (p.type === 'text' || p.type === 'reasoning')) return (p.type === 'reasoning' ? '(reasoning) ' : '') + str(p.text);
    return '[' + str(p && p.type) + ']';
  }
  // a rebuilt request as text: the system prompt, the tools by name, each message with its role
  function requestText(q) {
    var out = [];
    if (!q.complete) out.push('(partial: the log lacks an earlier request of this run)');
    (q.system || []).forEach(function (s) { out.push('[system · ' + str(s.id) + '] ' + str(s.text)); });
    if ((q.tools || []).length) out.push('[tools] ' + q.tools.map(function (t) { return str(t.name); }).join(', '));
    q.messages.forEach(function (m) {
      var line = '[' + str(m.role) + (m.tool_call_id ? ' · ' + str(m.tool_call_id) : '') + '] ' + (m.content || []).map(partText).join(' ');
      (m.tool_calls || []).forEach(function (c) { line += ' → ' + str(c.name) + '(' + JSON.stringify(c.arguments) + ')'; });
      out.push(line);
    });
    return out.join('\n');
  }
  function showDetails(n) {
    var box = $('details');
    box.replaceChildren();
    if (!n) { box.appendChild(el('p', 'hint', 'Select a row to see its details.')); return; }
    box.setAttribute('data-selected', n.id);
    box.setAttribute('data-kind', n.kind);
    box.appendChild(el('h2', null, n.label));
    var d = n.detail || {};
    var common = [['kind', n.kind], ['outcome', n.outcome],
      ['started', ms(n.t0 - (M.tStart || 0))], ['duration', n.t1 === null ? 'running' : ms(n.t1 - n.t0)]];
    if (n.kind === 'model') {
      var u = d.usage || {};
      box.appendChild(dl(common.concat([['model', d.model], ['step', d.step], ['attempt', d.attempt],
        ['input tokens', u.input_tokens], ['output tokens', u.output_tokens],
        ['cache read tokens', u.cache_read_tokens], ['usage reported', d.usage_reported], ['cost', d.cost],
        ['finish reason', d.finish_reason === null ? undefined : d.finish_reason],
        ['error', d.error || undefined], ['discarded', d.discarded]])));
      if (d.request) box.appendChild(pre('Request (as the model received it, after every hook)', requestText(d.request), 'request'));
      if (d.reasoning) box.appendChild(pre('Reasoning', d.reasoning, 'reasoning'));
      box.appendChild(pre('Reply (as streamed, after the delta hooks)', d.reply || '(no text)', 'reply'));
      d.calls.forEach(function (c, i) {
        if (c) box.appendChild(pre('Tool call ' + str(c.name) + ' (' + str(c.id) + ')', pretty(c.arguments), 'call-' + i));
      });
    } else if (n.kind === 'tool') {
      box.appendChild(dl(common.concat([['tool', d.tool], ['call id', d.call_id], ['decision', d.decision],
        ['refused by', d.refused_by], ['is error', d.is_error]])));
      if (d.arguments !== undefined) box.appendChild(pre('Arguments (effective, after every before_tool hook)', pretty(d.arguments), 'arguments'));
      if (d.progress) box.appendChild(pre('Progress', d.progress, 'progress'));
      if (d.result !== undefined) box.appendChild(pre('Result (after every after_tool hook)', str(d.result), 'result'));
    } else if (n.kind === 'compressed') {
      box.appendChild(dl(common.concat([['middleware', d.middleware], ['policy', d.policy_version], ['step', d.step],
        ['tokens before', d.original_tokens], ['tokens after', d.compressed_tokens],
        ['replaced messages', (d.source_message_ids || []).join(', ')],
        ['replaced artifacts', (d.source_artifact_ids || []).join(', ')],
        ['replacement message', d.replacement_message_id],
        ['stable prefix kept', d.stable_prefix_preserved]])));
    } else {
      box.appendChild(dl(common));
      box.appendChild(pre('Event', JSON.stringify(d, null, 2), 'event'));
    }
  }
  function select(n, scroll) {
    selected = n;
    showDetails(n);
    if (n && scroll) {
      var i = rows.indexOf(n);
      if (i >= 0) {
        var topPx = i * ROW_H, h = timeline.clientHeight;
        if (topPx < timeline.scrollTop) timeline.scrollTop = topPx;
        else if (topPx + ROW_H > timeline.scrollTop + h) timeline.scrollTop = topPx + ROW_H - h;
      }
    }
    renderRows(true);
  }

  // ---- summary and charts --------------------------------------------------
  function stat(parent, name, value, cls) {
    var s = el('span', 'stat' + (cls ? ' ' + cls : ''));
    s.setAttribute('data-stat', name);
    s.appendChild(document.createTextNode(name + ': '));
    s.appendChild(el('b', null, value));
    parent.appendChild(s);
  }
  function renderSummary() {
    var box = $('summary');
    box.replaceChildren();
    // the last top-level run decides (a paused run, then its resume)
    var tops = M.roots.filter(function (r) { return r.kind === 'run'; });
    var root = tops[tops.length - 1];
    if (tops.length > 1) stat(box, 'runs', tops.length);
    var status = !root ? 'no run' : root.t1 === null ? 'running' : root.detail.error ? 'failed: ' + root.detail.error : 'ok';
    stat(box, 'status', status, root && root.detail.error ? 'status-error' : 'status-ok');
    stat(box, 'duration', ms(Math.max(0, M.tEnd - (M.tStart || 0))));
    stat(box, 'model calls', M.totals.model);
    stat(box, 'tool calls', M.totals.tool);
    stat(box, 'input tokens', M.totals.input);
    stat(box, 'output tokens', M.totals.output);
    // a total with an unpriced call in it is a lower bound, and says so
    stat(box, 'cost', !M.totals.model ? usd(0) : M.totals.unpriced === M.totals.model ? 'cost unknown' :
      usd(M.totals.usd) + (M.totals.unpriced ? ' + cost unknown of ' + M.totals.unpriced + ' call' + (M.totals.unpriced > 1 ? 's' : '') : ''));
    var count = function (k) { return M.nodes.filter(function (n) { return n.kind === k; }).length; };
    stat(box, 'retries', count('retry'));
    stat(box, 'fallbacks', count('fallback'));
    stat(box, 'compressions', count('compressed'));
  }
  function renderCharts() {
    var W = 600, H = 90, pad = 4;
    var turns = Object.keys(M.turns).map(function (k) { return M.turns[k]; });
    var c1 = $('chart-turns'), s1 = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img' });
    var max = 0;
    turns.forEach(function (t) { max = Math.max(max, t.input + t.output); });
    if (!max) {
      s1.appendChild(svg('text', { x: 8, y: 20, 'class': 'empty' })).textContent =
        turns.length ? 'the model reported no token usage' : 'no model call yet';
    }
    max = Math.max(max, 1);
    var bw = (W - 2 * pad) / Math.max(1, turns.length);
    turns.forEach(function (t, i) {
      var x = pad + i * bw, hIn = (H - 2 * pad) * t.input / max, hOut = (H - 2 * pad) * t.output / max;
      var price = t.unpriced ? 'cost unknown' : usd(t.usd);
      var g = svg('g', { 'data-turn': t.label, 'data-input': t.input, 'data-output': t.output, 'data-cost': price });
      var title = svg('title', {});
      title.textContent = 'turn ' + t.label + ': ' + t.input + ' in, ' + t.output + ' out, ' + price;
      g.appendChild(title);
      g.appendChild(svg('rect', { x: x, y: H - pad - hIn - hOut, width: Math.max(0.5, bw * 0.8), height: hOut, 'class': 'out' }));
      g.appendChild(svg('rect', { x: x, y: H - pad - hIn, width: Math.max(0.5, bw * 0.8), height: hIn, 'class': 'in' }));
      s1.appendChild(g);
    });
    // cost per turn on its own scale: a dot per priced turn, joined; an unpriced turn breaks the line
    var maxUsd = 0;
    turns.forEach(function (t) { if (!t.unpriced) maxUsd = Math.max(maxUsd, t.usd); });
    var seg = [];
    var flush = function () { if (seg.length) s1.appendChild(svg('polyline', { points: seg.join(' '), 'class': 'usd' })); seg = []; };
    turns.forEach(function (t, i) {
      if (t.unpriced) { flush(); return; }
      var x = pad + i * bw + bw * 0.4, y = H - pad - (H - 2 * pad) * t.usd / Math.max(maxUsd, 1e-12);
      seg.push(x.toFixed(1) + ',' + y.toFixed(1));
      s1.appendChild(svg('circle', { cx: x.toFixed(1), cy: y.toFixed(1), r: 2.5, 'class': 'usd', 'data-turn': t.label, 'data-usd': t.usd }));
    });
    flush();
    c1.replaceChildren(s1);
    var c2 = $('chart-budget'), s2 = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img' });
    var span = Math.max(1, M.tEnd - (M.tStart || 0)), last = M.series[M.series.length - 1] || { tokens: 0, usd: 0, model: 0, tool: 0 };
    [['tokens', 'tok'], ['usd', 'usd'], ['model', 'mc'], ['tool', 'tc']].forEach(function (k) {
      var mx = Math.max(k[0] === 'usd' ? 1e-12 : 1, last[k[0]]);
      var pts = ['0,' + (H - pad)].concat(M.series.map(function (p) {
        return ((W * (p.t - (M.tStart || 0)) / span).toFixed(1)) + ',' + (H - pad - (H - 2 * pad) * p[k[0]] / mx).toFixed(1);
      }));
      var line = svg('polyline', { points: pts.join(' '), 'class': k[1], 'data-series': k[0], 'data-last': last[k[0]] });
      s2.appendChild(line);
    });
    c2.replaceChildren(s2);
  }
  function fillSelect(id, keys) {
    var s = $(id), have = {};
    for (var i = 1; i < s.options.length; i++) have[s.options[i].value] = true;
    Object.keys(keys).sort().forEach(function (k) {
      if (have[k]) return;
      var o = el('option', null, k);
      o.value = k;
      s.appendChild(o);
    });
  }
  function refresh() {
    rebuildRows();
    renderRows(true);
    renderSummary();
    renderCharts();
    fillSelect('filter-middleware', M.middlewares);
    fillSelect('filter-tool', M.tools);
    fillSelect('filter-outcome', M.outcomes);
    M.dirty = false;
  }

  // ---- filters and keys ----------------------------------------------------
  function onFilter() {
    filter.q = $('search').value.trim().toLowerCase();
    filter.mw = $('filter-middleware').value;
    filter.tool = $('filter-tool').value;
    filter.outcome = $('filter-outcome').value;
    timeline.scrollTop = 0;
    refresh();
  }
  $('search').addEventListener('input', onFilter);
  ['filter-middleware', 'filter-tool', 'filter-outcome'].forEach(function (id) { $(id).addEventListener('change', onFilter); });
  function onKey(ev) {
    var inInput = ev.target && (ev.target.tagName === 'INPUT' || ev.target.tagName === 'SELECT');
    if (ev.key === '/' && !inInput) { ev.preventDefault(); $('search').focus(); return; }
    if (ev.key === 'Escape') {
      $('search').value = ''; $('filter-middleware').value = ''; $('filter-tool').value = ''; $('filter-outcome').value = '';
      onFilter(); timeline.focus(); return;
    }
    if (inInput) return;
    var i = selected ? rows.indexOf(selected) : -1;
    if (ev.key === 'ArrowDown' || ev.key === 'j') { ev.preventDefault(); select(rows[Math.min(rows.length - 1, i + 1)], true); }
    else if (ev.key === 'ArrowUp' || ev.key === 'k') { ev.preventDefault(); select(rows[Math.max(0, i - 1)], true); }
    else if (ev.key === 'Home') { ev.preventDefault(); select(rows[0], true); }
    else if (ev.key === 'End') { ev.preventDefault(); select(rows[rows.length - 1], true); }
    else if ((ev.key === 'ArrowRight' || ev.key === 'l') && selected && selected.children.length) { selected.open = true; refresh(); select(selected, true); }
    else if ((ev.key === 'ArrowLeft' || ev.key === 'h') && selected) {
      if (selected.open && selected.children.length) { selected.open = false; refresh(); select(selected, true); }
      else if (selected.parent) select(selected.parent, true);
    } else if (ev.key === 'Enter' && selected) { showDetails(selected); }
  }
  document.addEventListener('keydown', onKey);
  // `#keys=j,j,Enter,/` replays those keys once the page is loaded, each as a
  // keydown event dispatched where a real one would go (the focused element),
  // so the same handler runs; the focused element's id lands in `data-focus`.
  function keysFromHash() {
    var m = /(?:^#|&)keys=([^&]+)/.exec(location.hash);
    if (!m) return;
    decodeURIComponent(m[1]).split(',').forEach(function (key) {
      if (!key) return;
      var target = document.activeElement || document.body;
      target.dispatchEvent(new KeyboardEvent('keydown', { key: key, bubbles: true, cancelable: true }));
    });
    var f = document.activeElement;
    document.body.setAttribute('data-focus', f && f.id ? f.id : f ? f.tagName.toLowerCase() : '');
  }

  // ---- start: a recorded run, or a live stream -----------------------------
  var data = JSON.parse($('run-data').textContent);
  if (data.title) { $('title').textContent = data.title; document.title = data.title; }
  // `#q=TEXT&middleware=NAME&tool=NAME&outcome=OUTCOME` sets the search and filters
  function filtersFromHash() {
    var set = false;
    [['q', 'search'], ['middleware', 'filter-middleware'], ['tool', 'filter-tool'], ['outcome', 'filter-outcome']].forEach(function (p) {
      var m = new RegExp('(?:^#|&)' + p[0] + '=([^&]+)').exec(location.hash);
      if (m) { $(p[1]).value = decodeURIComponent(m[1]); set = true; }
    });
    if (set) onFilter();
  }
  function selectFromHash() {
    var m = /(?:^#|&)select=([^&]+)/.exec(location.hash);
    if (!m) return;
    var want = decodeURIComponent(m[1]);
    // `tool:CALL_ID`, `model:STEP.ATTEMPT`, `kind:N` (the Nth of a kind), or a row id
    var parts = want.split(':'), n = null;
    if (parts[0] === 'tool') n = M.nodes.find(function (x) { return x.kind === 'tool' && str(x.detail.call_id) === parts[1]; });
    else if (parts[0] === 'model') n = M.nodes.find(function (x) { return x.kind === 'model' && str(x.detail.step) + '.' + str(x.detail.attempt) === parts[1]; });
    else if (parts.length === 2) n = M.nodes.filter(function (x) { return x.kind === parts[0]; })[Number(parts[1])];
    else n = M.nodes.find(function (x) { return x.id === want; });
    if (n) {
      for (var p = n.parent; p; p = p.parent) p.open = true;
      refresh();
      select(n, true);
    }
  }
  if (data.live) {
    var form = $('live-form');
    form.hidden = false;
    var status = $('live-status');
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      reset(); selected = null; showDetails(null); refresh();
      var t0 = performance.now();
      status.textContent = 'running…';
      var pending = false;
      var schedule = function () {
        if (pending) return;
        pending = true;
        requestAnimationFrame(function () { pending = false; refresh(); });
      };
      fetch(data.live.url, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: $('live-prompt').value }),
      }).then(function (resp) {
        if (!resp.ok) return resp.text().then(function (t) { status.textContent = 'refused: ' + t; });
        var reader = resp.body.getReader(), dec = new TextDecoder(), buf = '';
        var pump = function () {
          return reader.read().then(function (r) {
            if (r.done) { refresh(); selectFromHash(); document.body.setAttribute('data-live', 'done'); return; }
            buf += dec.decode(r.value, { stream: true }).replace(/\r\n/g, '\n');
            var cut;
            while ((cut = buf.indexOf('\n\n')) >= 0) {
              var frame = buf.slice(0, cut); buf = buf.slice(cut + 2);
              var name = 'message', lines = [];
              frame.split('\n').forEach(function (l) {
                if (l.indexOf('event:') === 0) name = l.slice(6).trim();
                else if (l.indexOf('data:') === 0) lines.push(l.slice(5).replace(/^ /, ''));
              });
              if (!lines.length) continue;
              var value;
              try { value = JSON.parse(lines.join('\n')); } catch (_) { continue; }
              if (name === 'finished') status.textContent = 'finished: ' + str(value.final);
              else if (name === 'error') status.textContent = 'failed (' + str(value.kind) + '): ' + str(value.message);
              else ingest({ t_us: Math.round((performance.now() - t0) * 1000), event: value });
            }
            schedule();
            return pump();
          });
        };
        return pump();
      }).catch(function (e) { status.textContent = 'the stream failed: ' + String(e); });
    });
    // `#prompt=TEXT` runs that prompt as soon as the page opens
    var auto = /(?:^#|&)prompt=([^&]+)/.exec(location.hash);
    if (auto) {
      $('live-prompt').value = decodeURIComponent(auto[1]);
      form.requestSubmit();
    }
  } else {
    (data.events || []).forEach(ingest);
  }
  refresh();
  filtersFromHash();
  selectFromHash();
  keysFromHash();
  document.body.setAttribute('data-ready', 'true');
  document.body.setAttribute('data-open-ms', performance.now().toFixed(1));
})();
