"""Fault injection on the node over DDS: what a crash, a stop or bad input costs.

The learner node and the simulated robot run as separate processes (the installed launchers);
this process injects the faults and reads the database.

1. kill -9 mid-stream: the robot publishes N trials at full speed; once about a third are stored
   the learner gets SIGKILL and is restarted 0.5 s later on the same database. With confirmations
   (the robot's default: ``TrialPublisher``) against the peer, the robot without them
   (``confirm:=false``, DDS acknowledgements only, the behaviour before): trials lost, and how long
   until the robot exited;
2. stops under load: the learner stopped by SIGINT or SIGTERM (alternately) while a robot streams:
   exit statuses, "cannot rollback" reports, and whether its stored-cases counter matches the database;
3. malformed flood: rounds of 1 MB trial_ids and sensor names, 5000-entry lists, control characters,
   out-of-range readings and far-future stamps, each round followed by a good trial: the learner's RSS
   after each round, database and log size;
4. the faults at the edges (``edges``): the database file removed, lifecycle transitions during
   learns, the node killed while it learns, a remote clock change, floods of incomplete trials, a held
   database lock, the confirmed stream on one core, ~/predict while learning, unanswered re-sends, a
   second learner and the smaller ones.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from . import edges
from .dds import bench_env, launch, run_folder, stop_process
from .environment import close_ros, ros_context, ros_node_importable
from .report import fmt_seconds, machine_line, markdown_table, output_dir, write_results

ROBOT_RATE = 10000.0


def _count(db: Path) -> int:
    from affordance_ros.data.storage import CaseStore, CaseStoreError
    try:
        with CaseStore(db, read_only=True) as store:
            return store.count()
    except CaseStoreError:
        return 0


def _ids(db: Path) -> set:
    from affordance_ros.data.storage import CaseStore
    with CaseStore(db, read_only=True) as store:
        return {r.trial_id for r in store.records()}


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def kill_run(tmp: Path, env: dict, n: int, confirm: bool, seed: int) -> dict:
    tmp.mkdir()
    db = tmp / "cases.db"
    params = {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0}
    learner = launch("learner_node", params, tmp, env)
    robot = None
    try:
        robot = launch("simulated_robot", {"count": n, "rate": ROBOT_RATE, "seed": seed, "trial_id_prefix": "b",
                                           "confirm": str(confirm).lower(), "resend_timeout": 1.0}, tmp, env)
        started = time.monotonic()
        _wait(lambda: _count(db) >= n // 3, 120)
        learner.kill()
        learner.wait()
        at_kill = _count(db)
        time.sleep(0.5)
        (tmp / "learner_node.log").rename(tmp / "learner_node.1.log")
        learner = launch("learner_node", params, tmp, env)
        robot_exit = robot.wait(300)
        robot_seconds = time.monotonic() - started
        _wait(lambda: _count(db) >= n, 5.0)  # (without confirmations: what was delivered still goes in)
    finally:
        if robot is not None and robot.poll() is None:
            robot.kill()
        learner_exit = stop_process(learner)
    stored = _ids(db) & {f"b-{k:06d}" for k in range(n)}
    log = (tmp / "simulated_robot.log").read_text()
    resent = next((int(line.split("sent again ")[1].split(" ")[0]) for line in log.splitlines()
                   if "sent again" in line and "confirmed stored" in line), 0)
    return {"confirm": confirm, "trials": n, "stored_at_kill": at_kill, "stored": len(stored), "lost": n - len(stored),
            "robot_exit": robot_exit, "robot_seconds": robot_seconds, "resent": resent, "learner_exit": learner_exit}


def stop_runs(tmp: Path, env: dict, stops: int) -> dict:
    tmp.mkdir()
    db = tmp / "cases.db"
    statuses, rollback, mismatched, context_invalid = [], 0, 0, 0
    for k in range(stops):
        sig = (signal.SIGINT, signal.SIGTERM)[k % 2]
        learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json",
                                          "status_period": 0.0}, tmp, env)
        robot = launch("simulated_robot", {"count": 400, "rate": ROBOT_RATE, "seed": k, "trial_id_prefix": f"s{k}",
                                           "confirm": "false"}, tmp, env)
        before = _count(db)
        _wait(lambda: _count(db) > before + 20, 60)
        time.sleep(0.01 * (k % 7))  # stops at various moments of the stream
        learner.send_signal(sig)
        try:
            statuses.append(learner.wait(60))
        except Exception:
            learner.kill()
            statuses.append(learner.wait())
        robot.kill()
        robot.wait()
        log = (tmp / "learner_node.log").read_text()
        rollback += "cannot rollback" in log
        context_invalid += "context is invalid" in log
        line = next((x for x in log.splitlines() if "stopping; cases: " in x), "")
        counted = int(line.split("stopping; cases: ")[1].split(" ")[0]) if line else -1
        mismatched += counted != _count(db) - before
        (tmp / "learner_node.log").rename(tmp / f"learner_node.{k}.log")
    return {"stops": stops, "exit_0": statuses.count(0), "segfaults": statuses.count(-11),
            "other_exits": sorted(s for s in statuses if s not in (0, -11)), "cannot_rollback": rollback,
            "counter_mismatches": mismatched, "context_invalid_warnings": context_invalid}


GOOD_TRIAL_WAIT = 60.0  # seconds a round of the malformed flood waits for its good trial to be stored


def flood(tmp: Path, env: dict, rounds: int) -> dict:
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from affordance_ros.msg import Action, Features
    tmp.mkdir()
    db = tmp / "cases.db"
    # The parts are unstamped, so the receive clock times trials out: a learner slowed by the 1 MB parts may
    # take a good trial's parts more than the default 5 s apart. What is measured is what the bad parts do,
    # so the good trials get as long as they are waited for.
    learner = launch("learner_node", {"database_path": db, "model_path": tmp / "model.json", "status_period": 0.0,
                                      "trial_timeout": GOOD_TRIAL_WAIT}, tmp, env)
    context = ros_context()
    node = rclpy.create_node("affordance_bench_flood", context=context)
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    pubs = {"action": node.create_publisher(Action, "action", qos),
            "object": node.create_publisher(Features, "object_features", qos),
            "effect": node.create_publisher(Features, "effects", qos)}
    rss = []
    try:
        _wait(lambda: all(p.get_subscription_count() for p in pubs.values()), 60)
        time.sleep(1.0)
        rss.append(_rss_mb(learner.pid))
        huge = "x" * 1_000_000
        for r in range(rounds):
            for k in range(30):
                pubs["action"].publish(Action(trial_id=f"{huge}{r}-{k}", action="tap"))
                pubs["object"].publish(Features(trial_id=f"n{k}", names=[huge], values=[1.0]))
                pubs["effect"].publish(Features(trial_id=f"l{k}", names=["obj_vel"] * 5000, values=[1.0] * 5000))
                pubs["action"].publish(Action(trial_id=f"c{k}\n[INFO] forged \x1b[31m", action="tap"))
                pubs["object"].publish(Features(trial_id=f"r{k}", names=["color"], values=[2e154]))
                future = Action(trial_id=f"f{k}", action="tap")
                future.header.stamp.sec = int(time.time()) + 1_000_000
                pubs["action"].publish(future)
            good = f"good{r}"
            pubs["action"].publish(Action(trial_id=good, action="tap"))
            pubs["object"].publish(Features(trial_id=good, names=["color"], values=[5.0]))
            pubs["effect"].publish(Features(trial_id=good, names=["obj_vel"], values=[5.0]))
            _wait(lambda: good in _ids(db) if db.exists() else False, GOOD_TRIAL_WAIT)
            rss.append(_rss_mb(learner.pid))
    finally:
        close_ros(context, [node])
        exit_status = stop_process(learner)
    stored = _ids(db)
    return {"rounds": rounds, "bytes_of_long_strings_per_round": 60_000_000 // 2, "rss_mb": rss,
            "good_stored": len(stored), "bad_stored": len(stored - {f"good{r}" for r in range(rounds)}),
            "database_bytes": db.stat().st_size, "log_bytes": (tmp / "learner_node.log").stat().st_size,
            "learner_exit": exit_status}


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(args) -> int:
    if not ros_node_importable("faults"):
        return 2
    out = output_dir(args.out)
    n = args.cases or (300 if args.quick else 2000)
    runs, stops, rounds = (1, 4, 3) if args.quick else (3, 30, 8)
    print(f"bench faults{' (quick)' if args.quick else ''}: kill -9 mid-stream ({runs} x {n} trials, with and "
          f"without confirmations), {stops} stops under load, {rounds} rounds of malformed messages, and the faults "
          "at the edges (a removed database, transitions during a learn, floods, ...)")
    print(f"machine: {machine_line()}")
    kills = []
    with run_folder("faults", out) as tmpdir:
        env = bench_env(Path(tmpdir))
        os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
        for r in range(runs):
            for confirm in (True, False):
                result = kill_run(Path(tmpdir) / f"kill{r}{confirm:d}", env, n, confirm, seed=r)
                kills.append(result)
                print(f"  kill -9 run {r + 1}, {'with' if confirm else 'without'} confirmations: "
                      f"{result['lost']} of {n} lost (stored at the kill {result['stored_at_kill']}), robot exit "
                      f"{result['robot_exit']} after {result['robot_seconds']:.1f} s, {result['resent']} re-sent")
        stopped = stop_runs(Path(tmpdir) / "stops", env, stops)
        print(f"  stops: {stopped}")
        flooded = flood(Path(tmpdir) / "flood", env, rounds)
        print(f"  flood: {flooded}")
        found = edge_runs(Path(tmpdir), env, args.quick, n)
    rows = []
    for confirm in (True, False):
        mine = [k for k in kills if k["confirm"] == confirm]
        rows.append([f"kill -9 mid-stream + restart, {n} trials, robot {'with' if confirm else 'without'} "
                     "confirmations: trials lost per run",
                     ", ".join(str(k["lost"]) for k in mine)
                     + " (robot done after " + ", ".join(f"{k['robot_seconds']:.1f}" for k in mine) + " s)"])
    rows += [[f"learner stopped by SIGINT/SIGTERM under load ({stopped['stops']} stops): exit 0 / segfault / other",
              f"{stopped['exit_0']} / {stopped['segfaults']} / {stopped['other_exits'] or 0}"],
             ["stops with 'cannot rollback', with counter != database, with 'context is invalid'",
              f"{stopped['cannot_rollback']}, {stopped['counter_mismatches']}, "
              f"{stopped['context_invalid_warnings']}"],
             [f"malformed flood, {rounds} rounds of 30 MB of long strings: learner RSS (MB) after each round",
              " → ".join(f"{x:.0f}" for x in flooded["rss_mb"])],
             ["malformed flood: bad cases stored, database size, log size",
              f"{flooded['bad_stored']}, {flooded['database_bytes'] / 1e3:.0f} kB, "
              f"{flooded['log_bytes'] / 1e3:.0f} kB"]]
    rows += edge_rows(found)
    table = markdown_table(["fault", "figure"], rows)
    write_results(out, "faults", table, args.quick, {"kills": kills, "stops": stopped, "flood": flooded, **found})
    return 0


def edge_runs(tmp: Path, env: dict, quick: bool, n: int) -> dict:
    """The runs of ``edges``, each printed as it ends."""
    found = {}

    def step(name: str, run, *args):
        started = time.monotonic()
        found[name] = result = run(*args)
        print(f"  {name} ({time.monotonic() - started:.0f} s): {result}", flush=True)
        return result
    step("removed_database", edges.removed_database, tmp / "removed", env, n)
    step("lifecycle", edges.lifecycle, tmp / "lifecycle", env, 10.0 if quick else 60.0)
    step("orphaned_worker", edges.orphaned_worker, tmp / "orphan", env)
    step("clock", edges.clock, tmp / "clock", env, 10 if quick else 50)
    seconds = 5.0 if quick else 60.0
    found["floods"] = [step(f"flood_{kind}", edges.flood, tmp / f"flood_{kind}", env, kind, seconds, 2000.0)
                       for kind in ("fresh", "now", "stampless")]
    if not quick:  # the learner slower than the flood, the good trial sent during it
        found["floods"] += [step(f"flood_{kind}_overloaded", edges.flood, tmp / f"flood_{kind}_overloaded", env,
                                 kind, seconds / 2, 2000.0, True) for kind in ("fresh", "now", "stampless")]
    # a flooding writer that keeps all it was refused (TrialPublisher's QoS), the good robot on topics of its own
    # (and, as the peer, on the shared ones)
    found["floods"] += [step(f"flood_keep_all_{'own' if own else 'shared'}{'_overloaded' if overloaded else ''}",
                             edges.flood, tmp / f"flood_keep_all_{own:d}{overloaded:d}", env, "now", seconds / 2,
                             2000.0, overloaded, True, own)
                        for overloaded in ((False,) if quick else (False, True))
                        for own in ((True,) if quick else (True, False))]
    found["locks"] = [step(f"lock_{hold:.0f}", edges.held_lock, tmp / f"lock{hold:.0f}", env, hold, 100)
                      for hold in ((5.0,) if quick else (10.0, 25.0))]
    trials = 1000 if quick else 5000
    found["rates"] = [step(f"rate_confirm_{confirm}", edges.confirmed_rate, tmp / f"rate{confirm:d}", env, trials,
                           confirm) for confirm in (True, False)]
    step("predict", edges.predict_latency, tmp / "predict", env, 2000 if quick else 20000, 100 if quick else 1000)
    step("resends", edges.resends)
    step("smaller", edges.smaller, tmp / "smaller", env)
    return found


def edge_rows(found: dict) -> list:
    """The table's rows of the runs of ``edges``, one or two per numbered run of ``edges``."""
    removed, life, orphan, clock = (found[k] for k in ("removed_database", "lifecycle", "orphaned_worker", "clock"))
    rows = [[f"1. cases.db removed while a robot streams {removed['trials']} trials (then its folder, then back): "
             "confirmed trials missing at the next start / confirmed while nothing could be written back",
             f"{removed['lost']} of {removed['confirmed']} / {removed['confirmed_while_gone']}"],
            ["2. deactivate during ~/learn: service answered / action result; random transitions "
             f"{life['random_seconds']:.0f} s while streaming and learning: calls unanswered, learner exit",
             f"{life['service_answered']} / {life['action_result']}; {life['unanswered']} of {life['learn_calls']}, "
             f"exit {life['learner_exit']}, {life['tracebacks']} tracebacks"],
            ["3. SIGKILL during a learn: processes of the node alive 5 s later / newer model overwritten",
             f"{orphan['alive_5_s_after_the_kill']} of {orphan['processes_of_the_node']} / "
             f"{orphan['newer_model_overwritten']}"],
            [f"4. use_sim_time set remotely: refused; /clock at 1 s, {clock['trials']} good trials: answered "
             "rejected / retry, stored once the clock is right",
             f"{clock['set_use_sim_time_refused']}; {clock['answered']['rejected']} / {clock['answered']['retry']}, "
             f"{clock['stored_once_the_clock_is_right']}"]]
    for f in found["floods"]:
        overloaded = (", the learner sharing its core with a busy loop (flood held back "
                      f"{f['held_back']} times), the good trial sent during the flood") if f.get("overloaded") else ""
        if f.get("keep_all"):
            overloaded = (f", from a keep-all writer (held back {f['held_back']} times), the good robot on "
                          + ("topics of its own" if f["own_topics"] else "the shared topics")
                          + (", the learner sharing its core with a busy loop, the good trial sent during the flood"
                             if f["overloaded"] else ""))
        rows.append([f"5. flood of incomplete trials ({f['kind']}), {f['parts'] / f['seconds']:.0f} parts/s for "
                     f"{f['seconds']:.0f} s{overloaded}: most pending, RSS before → after (MB), log lines, a good "
                     "trial's answer",
                     f"{f['max_pending']}, {f['rss_mb'][0]:.0f} → {f['rss_mb'][1]:.0f}, {f['log_lines']}, "
                     f"{fmt_seconds(f['good_trial_seconds'])}"])
    for lock in found["locks"]:
        p = lock["predicts"]
        rows.append([f"6. database locked by another program for {lock['hold_seconds']:.0f} s: ~/predict max, "
                     "unanswered; told on /diagnostics; confirmed during the lock; lost",
                     f"{fmt_seconds(p['max'])}, {p['unanswered']} of {p['calls']}; {lock['told_on_diagnostics']}; "
                     f"{lock['confirmed_during_the_lock']}; {lock['lost']} of {lock['trials']}"])
    rate, peer = found["rates"]
    rows.append([f"7. robot at full speed, learner on one core, {rate['trials']} trials: confirmed per second "
                 "(peer: without confirmations); CPU ms per trial, learner / robot",
                 f"{rate['per_second']:.0f} ({peer['per_second']:.0f}: ratio "
                 f"{rate['per_second'] / peer['per_second']:.2f}); {rate['learner_cpu_ms_per_trial']:.2f} / "
                 f"{rate['robot_cpu_ms_per_trial']:.2f} ({peer['learner_cpu_ms_per_trial']:.2f} / "
                 f"{peer['robot_cpu_ms_per_trial']:.2f})"])
    predict = found["predict"]
    for clients in (1, 4):
        idle, busy = predict[f"idle_{clients}"], predict[f"learning_{clients}"]
        rows.append([f"8. ~/predict, {clients} client(s), p50 / p99 / max, unanswered: idle; while learns on "
                     f"{predict['cases']} cases run back to back",
                     f"{fmt_seconds(idle['p50'])} / {fmt_seconds(idle['p99'])} / {fmt_seconds(idle['max'])}, "
                     f"{idle['unanswered']}; {fmt_seconds(busy['p50'])} / {fmt_seconds(busy['p99'])} / "
                     f"{fmt_seconds(busy['max'])}, {busy['unanswered']}"])
    default = predict["learning_4_rclpy_default"]
    rows.append(["8. ~/predict, 4 clients while learning: first sends answered only by the re-send (unanswered "
                 "after it), clients as planners are told (rclpy's default QoS); requests sent / answered by the "
                 "learner",
                 f"{predict['learning_4']['first_sends_missed_by_outcome']['resent']} "
                 f"({predict['learning_4']['unanswered']}); "
                 f"{default['first_sends_missed_by_outcome']['resent']} ({default['unanswered']}); "
                 f"{predict['requests_sent']} / {predict['learner_answered']}"])
    resent = found["resends"]
    rows.append(["9. a trial nobody answers: re-sends in 8 s / in 1000 s, the longest wait (s), given up; mangled ids "
                 "refused",
                 f"{resent['resends_in_8_s']} / {resent['resends_in_all']}, {resent['longest_wait_s']:.2f}, "
                 + ("never" if resent["seconds_until_given_up"] is None else
                    f"after {resent['seconds_until_given_up']:.0f} s")
                 + f"; {resent['mangled_ids_refused']} of {resent['mangled_ids']}"])
    small = found["smaller"]
    huge = small["huge_request"]
    rows.append(["10. second learner on one database: exit, lines; configuration too large: exit; 3 million names "
                 "in a predict: sent?; the most a client can send (the interfaces' bound): seconds, RSS (MB); "
                 "online save over a replaced model file: file kept",
                 f"{small['second_learner_exit']}, {len(small['second_learner_lines'])}; {small['huge_config_exit']}; "
                 f"{'not sent' if small['huge_request_not_sent'] else 'SENT'}; {huge['names']} names: "
                 f"{huge['seconds']:.2f} s, {huge['rss_mb'][0]:.0f} → {huge['rss_mb'][1]:.0f}; "
                 f"{small['replaced_model_kept']}"])
    return rows
