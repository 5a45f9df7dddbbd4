#!/usr/bin/env python3
"""Writes the category scenarios (scenarios/<category>.json) from DOMAIN.md §4-§5.

The JSON files are the source of truth once committed; this script only saves
typing when the rules change. Run: python3 scenarios/generate.py
quickstart.json is written by hand and not touched here.
"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
ENT = "com.apple.developer.carplay-"

def general(i, text): return {"id": i, "general": {"text": text}}
def lst(tid, n=3, title="List"):
    return {"id": tid, "list": {"title": title, "sections": [{"id": tid + "-s", "items": [general(f"{tid}-i{k}", f"Item {k}") for k in range(1, n + 1)]}]}}
def grid(tid, n=4):
    return {"id": tid, "grid": {"title": "Grid", "buttons": [{"id": f"{tid}-b{k}", "titleVariants": [f"Button {k}"]} for k in range(1, n + 1)]}}
def tabs(tid, n=2):
    return {"id": tid, "tabBar": {"tabs": [{"id": f"{tid}-t{k}", "title": f"Tab {k}", "template": lst(f"{tid}-t{k}-list", 2)} for k in range(1, n + 1)], "selectedTabId": f"{tid}-t1"}}
def info(tid, items=3, actions=1):
    return {"id": tid, "information": {"title": "Information", "items": [{"id": f"{tid}-it{k}", "title": f"Label {k}", "detail": f"Detail {k}"} for k in range(1, items + 1)],
            "actions": [{"id": f"{tid}-a{k}", "title": f"Action {k}"} for k in range(1, actions + 1)]}}
def poi(tid, n=3):
    return {"id": tid, "pointOfInterest": {"title": "Nearby", "selectedIndex": -1, "points": [
        {"id": f"{tid}-p{k}", "title": f"Place {k}", "location": {"latitude": 48.85 + k / 100, "longitude": 2.35}} for k in range(1, n + 1)]}}
def contact(tid, lines=2, actions=2):
    return {"id": tid, "contact": {"title": "Ada Lovelace", "subtitle": "Mobile", "informativeTexts": [f"Line {k}" for k in range(1, lines + 1)],
            "actions": [{"id": f"{tid}-a{k}", "kind": "CONTACT_ACTION_KIND_CALL" if k == 1 else "CONTACT_ACTION_KIND_CUSTOM", "title": f"Action {k}"} for k in range(1, actions + 1)]}}
def mapt(tid, lead=1, trail=1, buttons=2):
    return {"id": tid, "map": {"leadingButtons": [{"id": f"{tid}-l{k}", "title": f"L{k}"} for k in range(1, lead + 1)],
            "trailingButtons": [{"id": f"{tid}-t{k}", "title": f"T{k}"} for k in range(1, trail + 1)],
            "mapButtons": [{"id": f"{tid}-m{k}"} for k in range(1, buttons + 1)]}}
def search(tid): return {"id": tid, "search": {"placeholder": "Where to?"}}
def voice(tid): return {"id": tid, "voiceControl": {"states": [{"id": "listening", "titleVariants": ["Listening..."]}], "activeStateId": "listening"}}
def alert(tid, actions=1):
    return {"id": tid, "alert": {"titleVariants": ["Are you sure you want to continue?", "Continue?"], "actions": [{"id": f"{tid}-a{k}", "title": "OK" if k == 1 else f"Action {k}"} for k in range(1, actions + 1)]}}
def sheet(tid, actions=2):
    return {"id": tid, "actionSheet": {"title": "Choose", "message": "Pick one", "actions": [{"id": f"{tid}-a{k}", "title": f"Action {k}"} for k in range(1, actions + 1)]}}
def nowplaying(): return {"title": "Song", "artist": "Artist", "album": "Album", "durationSeconds": 200, "playbackRate": 1}

class Steps:
    def __init__(self, app): self.app, self.steps = app, []
    def add(self, step, note=None):
        if note: step = dict(step, note=note)
        self.steps.append(step)
    def req(self, op, value, expect=None, limit=None, depth=None, note=None):
        r = {"appId": self.app, op: value}
        if expect: r["expect"] = expect
        if limit: r["expectLimit"] = limit
        if depth: r["expectDepth"] = depth
        self.add({"request": r}, note)
    def ok_push_pop(self, t, note=None):
        self.req("push", t, depth=2, note=note)
        self.req("pop", {}, depth=1)
    def refused(self, op, t, note):
        self.req(op, t, expect="ERROR_CODE_NOT_ALLOWED_FOR_CATEGORY", note=note)
    def limit(self, op, t, limit, note, after_ok_pop=False):
        self.req(op, t, expect="ERROR_CODE_LIMIT_EXCEEDED", limit=limit, note=note)
    def too_few(self, op, t, limit, note):
        self.req(op, t, expect="ERROR_CODE_INVALID_TEMPLATE", limit=limit, note=note)

ALL = ["action_sheet", "alert", "grid", "list", "tab_bar", "information", "point_of_interest", "now_playing", "contact", "map", "search", "voice_control"]
ALLOWED = {
    "audio": {"alert", "grid", "list", "tab_bar", "now_playing"},
    "communication": {"action_sheet", "alert", "grid", "list", "tab_bar", "information", "contact"},
    "navigation": {"action_sheet", "alert", "grid", "list", "tab_bar", "information", "contact", "map", "search", "voice_control"},
    "tasks": {"action_sheet", "alert", "grid", "list", "tab_bar", "information", "point_of_interest"},
}

def car_side(s, column, root, list_max):
    """The car's side of a session: a selection and its completion, a tab, a
    list capped while driving, and (where the category has one) a point of
    interest region and selection."""
    app_id = s.app
    # A selection: the car shows a spinner until the app completes the event.
    pick = lst("car-pick", 3, "Pick one")
    s.req("push", pick, depth=2, note="the car side: a list to pick from")
    s.add({"hmiInput": {"templateId": "car-pick", "selectItem": {"itemId": "car-pick-i2"}}}, "the driver taps an item")
    s.add({"expectEvent": {"appId": app_id, "kind": "item_selected", "templateId": "car-pick", "itemId": "car-pick-i2", "needsCompletion": True}})
    s.add({"expectScreen": {"templateId": "car-pick", "pendingItemId": "car-pick-i2"}}, "the car shows a spinner on it")
    s.add({"completeEvent": {"appId": app_id}}, "the app is done")
    s.add({"expectScreen": {"templateId": "car-pick", "pendingItemId": ""}}, "the spinner stops")
    s.req("pop", {}, depth=1)
    # A tab.
    s.req("setRoot", tabs("car-tabs", 2), depth=1, note="a tab bar")
    s.add({"hmiInput": {"templateId": "car-tabs", "selectTab": {"tabId": "car-tabs-t2"}}}, "the driver picks the second tab")
    s.add({"expectEvent": {"appId": app_id, "kind": "tab_selected", "buttonId": "car-tabs-t2"}})
    s.req("setRoot", root, depth=1, note="back to the usual root")
    # While driving the car caps lists (VehicleDefaults: 12 items).
    s.add({"setVehicleState": {"state": {"driving": True, "limitKeyboard": True, "limitLists": True}}}, "the car starts driving")
    s.req("push", lst("car-long", list_max), depth=2, note=f"a {list_max}-item list while driving")
    shown = min(list_max, 12)
    s.add({"expectScreen": {"templateId": "car-long", "itemsShown": shown}},
          f"the car shows {shown} of {list_max} items while driving" if list_max > shown else f"all {list_max} items fit the driving cap")
    s.req("pop", {}, depth=1)
    s.add({"setVehicleState": {"state": {"driving": False}}}, "parked again")
    if "point_of_interest" in ALLOWED[column]:
        s.req("push", poi("car-poi", 3), depth=2, note="a point-of-interest map")
        s.add({"hmiInput": {"templateId": "car-poi", "poiRegion": {"region": {"centerLatitude": 48.87, "centerLongitude": 2.35, "spanLatitude": 0.05, "spanLongitude": 0.05}}}}, "the driver pans the map")
        s.add({"expectEvent": {"appId": app_id, "kind": "poi_region_changed", "templateId": "car-poi"}})
        s.add({"hmiInput": {"templateId": "car-poi", "selectPoi": {"poiId": "car-poi-p2"}}}, "the driver picks a place")
        s.add({"expectEvent": {"appId": app_id, "kind": "poi_selected", "templateId": "car-poi", "itemId": "car-poi-p2"}})
        s.req("pop", {}, depth=1)

def build(name, title, app_id, entitlement, column, depth, tabs_max, extra=None, list_max=15):
    s = Steps(app_id)
    allowed = ALLOWED[column]
    s.add({"launch": {"appId": app_id}})
    # Navigation apps draw on a map root; the others start from a list.
    root = mapt("root-map") if column == "navigation" else lst("root", 3, title)
    root_id = root["id"]
    s.req("setRoot", root, depth=1, note="the root template")
    s.add({"expectScreen": {"appId": app_id, "templateId": root_id, "depth": 1}})
    car_side(s, column, root, list_max)
    # Every template the category may use.
    for kind in ALL:
        if kind not in allowed:
            continue
        if kind in ("grid", "list", "information", "point_of_interest", "contact", "search"):
            t = {"grid": grid, "list": lst, "information": info, "point_of_interest": poi, "contact": contact, "search": search}[kind]("allowed-" + kind.replace("_", "-"))
            s.ok_push_pop(t, note=f"{kind} is allowed")
        elif kind in ("alert", "action_sheet", "voice_control"):
            t = {"alert": alert, "action_sheet": sheet, "voice_control": voice}[kind]("allowed-" + kind.replace("_", "-"))
            s.req("present", t, note=f"{kind} is allowed (modal)")
            s.add({"expectScreen": {"presentedId": t["id"]}})
            s.req("dismiss", {})
        elif kind == "tab_bar":
            s.req("setRoot", tabs("allowed-tabs", 2), depth=1, note="tab_bar is allowed (root only)")
            s.req("setRoot", root, depth=1, note="back to the usual root")
        elif kind == "map":
            pass  # the root already
        elif kind == "now_playing":
            s.req("updateNowPlaying", nowplaying(), note="now_playing is allowed")
            s.req("showNowPlaying", {}, depth=2)
            s.req("push", lst("over-now-playing", 2), depth=3, note="only a list on top of now playing")
            s.req("popToRoot", {}, depth=1)
    # Every template it may not use: the typed error, and the session survives.
    for kind in ALL:
        if kind in allowed:
            continue
        note = f"{kind} is not allowed for {name}"
        if kind in ("alert", "action_sheet", "voice_control"):
            s.refused("present", {"alert": alert, "action_sheet": sheet, "voice_control": voice}[kind]("refused-" + kind.replace("_", "-")), note)
        elif kind == "now_playing":
            s.req("showNowPlaying", {}, expect="ERROR_CODE_NOT_ALLOWED_FOR_CATEGORY", note=note)
        elif kind == "map":
            s.refused("setRoot", mapt("refused-map"), note)
        elif kind == "tab_bar":
            s.refused("setRoot", tabs("refused-tabs"), note)
        else:
            s.refused("push", {"grid": grid, "list": lst, "information": info, "point_of_interest": poi, "contact": contact, "search": search}[kind]("refused-" + kind.replace("_", "-")), note)
    s.add({"expectScreen": {"templateId": root_id, "depth": 1}}, "refusals left the stack alone")
    # Stack depth, root included.
    for d in range(2, depth + 1):
        s.req("push", lst(f"level-{d}", 2), depth=d, note=f"depth {d} of {depth}")
    s.req("push", lst(f"level-{depth + 1}", 2), expect="ERROR_CODE_DEPTH_EXCEEDED", limit="stack.depth", note=f"depth {depth + 1} is past the limit")
    s.req("popToRoot", {}, depth=1)
    # Count limits, each at the limit (OK) and one past it (typed error).
    def at_and_past(maker_ok, maker_bad, op, limit, what, code="ERROR_CODE_LIMIT_EXCEEDED"):
        if op == "push":
            s.ok_push_pop(maker_ok, note=f"{what}: at the limit")
        elif op == "present":
            s.req("present", maker_ok, note=f"{what}: at the limit")
            s.req("dismiss", {})
        else:
            s.req(op, maker_ok, depth=1, note=f"{what}: at the limit")
        s.req(op, maker_bad, expect=code, limit=limit, note=f"{what}: past the limit")
        if op == "setRoot":
            s.req("setRoot", root, depth=1)
    if column != "navigation" and app_id.endswith("ordering"):
        at_and_past(lst("list-12", 12), lst("list-13", 13), "push", "list.items", "quick-ordering list 12 items")
    at_and_past(grid("grid-8", 8), grid("grid-9", 9), "push", "grid.buttons", "grid 8 buttons")
    at_and_past(tabs("tabs-max", tabs_max), tabs("tabs-past", tabs_max + 1), "setRoot", "tabBar.tabs", f"tab bar {tabs_max} tabs")
    if "information" in allowed:
        items = 12 if app_id.endswith("ordering") else 10
        at_and_past(info("info-items-ok", items), info("info-items-past", items + 1), "push", "information.items", f"information {items} items")
        at_and_past(info("info-actions-ok", 2, 3), info("info-actions-past", 2, 4), "push", "information.actions", "information 3 actions")
    if "point_of_interest" in allowed:
        at_and_past(poi("poi-12", 12), poi("poi-13", 13), "push", "pointOfInterest.points", "point of interest 12 points")
    if "contact" in allowed:
        at_and_past(contact("contact-4-actions", 2, 4), contact("contact-5-actions", 2, 5), "push", "contact.actions", "contact 4 actions")
        at_and_past(contact("contact-3-lines", 3, 1), contact("contact-4-lines", 4, 1), "push", "contact.informativeTexts", "contact 3 lines")
    if "map" in allowed:
        at_and_past(mapt("map-2-lead", 2, 0, 0), mapt("map-3-lead", 3, 0, 0), "setRoot", "map.leadingButtons", "map 2 leading buttons")
        at_and_past(mapt("map-2-trail", 0, 2, 0), mapt("map-3-trail", 0, 3, 0), "setRoot", "map.trailingButtons", "map 2 trailing buttons")
        at_and_past(mapt("map-4-buttons", 0, 0, 4), mapt("map-5-buttons", 0, 0, 5), "setRoot", "map.mapButtons", "map 4 map buttons")
    if "action_sheet" in allowed:
        s.too_few("present", sheet("sheet-1-action", 1), "actionSheet.actions", "action sheet needs two or more actions")
    s.too_few("present", alert("alert-no-action", 0), "alert.actions", "alert needs at least one action")
    if extra:
        extra(s)
    s.add({"disconnect": {}})
    scenario = {
        "name": name,
        "description": f"{title}: the car side (a selection and its completion, a tab, a list capped while driving{', a point-of-interest region and selection' if 'point_of_interest' in allowed else ''}), every template the {name} category may use, the typed error for each it may not, stack depth {depth}, and its count limits (DOMAIN.md §4-§5).",
        "deviceName": "Scenario iPhone",
        "apps": [{"appId": app_id, "displayName": title, "entitlements": [ENT + e for e in entitlement.split("+")]}],
        "steps": s.steps,
    }
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(scenario, f, indent=2)
        f.write("\n")

def audio_extra(s):
    s.req("updateNowPlaying", dict(nowplaying(), title="Another song"), note="now playing updated in place")

def driving_task_extra(s):
    # Data items refresh at most once every 10 s (TEMPLATES.md section 8).
    s.req("push", lst("data-items", 2, "Data"), depth=2, note="data items the app refreshes")
    s.req("update", lst("data-items", 2, "Data, refreshed"), note="the first refresh is accepted")
    s.req("update", lst("data-items", 2, "Data, again"), expect="ERROR_CODE_RATE_LIMITED", limit="refresh.interval_ms", note="a second one within 10 s is refused")
    s.req("pop", {}, depth=1)

build("audio", "Radio", "com.example.radio", "audio", "audio", 5, 4, audio_extra)
build("communication", "Messages", "com.example.messages", "communication", "communication", 5, 5)
build("navigation", "Maps", "com.example.maps", "maps", "navigation", 5, 5)
build("parking", "Parking", "com.example.parking", "parking", "tasks", 5, 5)
build("quick-ordering", "Coffee", "com.example.quick-ordering", "quick-ordering", "tasks", 2, 5, list_max=12)
build("driving-task", "Road Tasks", "com.example.driving-task", "driving-task", "tasks", 2, 5, driving_task_extra)
build("ev-charging", "Charge", "com.example.charging", "charging", "tasks", 5, 5)
build("fueling", "Fuel", "com.example.fueling", "fueling", "tasks", 3, 5)
build("charging-fueling", "Charge & Fuel", "com.example.charging-fueling", "charging+fueling", "tasks", 3, 5)
build("public-safety", "Alerts", "com.example.public-safety", "public-safety", "tasks", 5, 5)
print("written")
