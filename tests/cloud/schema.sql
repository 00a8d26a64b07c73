-- The cloud's schema, as seed 000 describes it (Pairing, Capture-to-cloud,
-- Realtime, Breakpoints, Settings sync), for a plain PostgreSQL 15 standing in
-- for Supabase's. Loaded by pg.py into a fresh cluster; the contract double
-- (double.py) talks to it the way PostgREST does: it logs in as
-- `authenticator`, and per request does SET LOCAL ROLE <the JWT's role> and
-- set_config('request.jwt.claims', <the JWT's claims>, true), so the GRANTs
-- and row-level security below apply for real.

SET TimeZone = 'UTC';

-- --- roles, as Supabase has them ---------------------------------------------

-- Roles belong to the cluster, not the database: created only if missing, so
-- this file loads into a second database of the same cluster too.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'anon') THEN
    CREATE ROLE anon NOLOGIN NOINHERIT;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'authenticated') THEN
    CREATE ROLE authenticated NOLOGIN NOINHERIT;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'service_role') THEN
    CREATE ROLE service_role NOLOGIN NOINHERIT BYPASSRLS;   -- the dashboard's / edge functions' key
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'authenticator') THEN
    CREATE ROLE authenticator LOGIN NOINHERIT;              -- PostgREST's login role
  END IF;
END $$;
SET client_min_messages = warning;  -- re-granting a membership is a NOTICE
GRANT anon, authenticated, service_role TO authenticator;
RESET client_min_messages;

GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- --- auth.jwt() and the device's claim -------------------------------------------

CREATE SCHEMA auth;
GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;

-- The request's JWT claims, as PostgREST puts them in the GUC request.jwt.claims.
CREATE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb
$$;

CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT nullif(auth.jwt() ->> 'sub', '')::uuid
$$;

CREATE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT auth.jwt() ->> 'role'
$$;

-- The device a device JWT was minted for: app_metadata.device_uuid (only the
-- server sets app_metadata). NULL for any other token.
CREATE FUNCTION public.device_uuid() RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT nullif(auth.jwt() -> 'app_metadata' ->> 'device_uuid', '')::uuid
$$;
GRANT EXECUTE ON FUNCTION auth.jwt(), auth.uid(), auth.role(), public.device_uuid() TO anon, authenticated, service_role;

-- --- capture to cloud ---------------------------------------------------------------

-- One row per captured exchange. Partitioned by day on ts, so the unique key
-- must include ts: a retry has to resend the same ts to be recognised.
CREATE TABLE public.entries (
  request_id  text        NOT NULL,
  device_uuid uuid        NOT NULL,
  ts          timestamptz NOT NULL,
  kind        text        NOT NULL,
  payload     jsonb       NOT NULL,
  inserted_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT entries_request_id_ts_key UNIQUE (request_id, ts)
) PARTITION BY RANGE (ts);

CREATE TABLE public.entries_default PARTITION OF public.entries DEFAULT;

-- Day partitions for a fortnight around today (UTC); anything else lands in
-- the default partition, where the unique key holds just the same.
DO $$
DECLARE d date;
BEGIN
  FOR i IN -7..7 LOOP
    d := current_date + i;
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.entries FOR VALUES FROM (%L) TO (%L)',
                   'entries_' || to_char(d, 'YYYYMMDD'), d::timestamptz, (d + 1)::timestamptz);
  END LOOP;
END $$;

CREATE INDEX entries_device_ts ON public.entries (device_uuid, ts);

CREATE TABLE public.device_status (
  device_uuid       uuid PRIMARY KEY,
  online            boolean,
  last_heartbeat_at timestamptz,
  vpn_state         text,
  source            text,
  country           text,
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- --- breakpoints ----------------------------------------------------------------------

CREATE TABLE public.breakpoint_events (
  id               bigserial PRIMARY KEY,
  device_uuid      uuid        NOT NULL,
  kind             text        NOT NULL,
  request_id       text        NOT NULL,
  raw_http_initial text,
  raw_http_final   text,
  outcome          text,
  paused_at        timestamptz NOT NULL DEFAULT now(),
  resumed_at       timestamptz
);

-- --- settings ------------------------------------------------------------------------

CREATE TABLE public.settings_global (
  id       int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  settings jsonb NOT NULL DEFAULT '{}'
);
INSERT INTO public.settings_global (id, settings) VALUES (1, '{}');

CREATE TABLE public.settings_device (
  device_uuid uuid PRIMARY KEY,
  settings    jsonb NOT NULL DEFAULT '{}'
);

-- Global settings merged with the device's, the device's winning; a null in
-- the device's settings means "inherit" (seed 000: a nullable per-device
-- override), so nulls are stripped before the merge. SECURITY INVOKER: the
-- caller's row-level security decides which device row it can see.
CREATE FUNCTION public.effective_settings_for_device(target_uuid uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT settings FROM public.settings_global WHERE id = 1), '{}'::jsonb)
      || coalesce(jsonb_strip_nulls((SELECT settings FROM public.settings_device WHERE device_uuid = target_uuid)), '{}'::jsonb)
$$;
REVOKE EXECUTE ON FUNCTION public.effective_settings_for_device(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.effective_settings_for_device(uuid) TO authenticated, service_role;

-- --- pairing ----------------------------------------------------------------------------

CREATE TABLE public.devices (
  device_uuid uuid PRIMARY KEY,
  owner       uuid,
  name        text,
  model       text,
  os_version  text,
  setup       jsonb,
  jti         text,             -- the current token's id; a token with another jti is superseded
  revoked     boolean NOT NULL DEFAULT false,
  paired_at   timestamptz
);

CREATE TABLE public.pairing_codes (
  code       text PRIMARY KEY,
  owner      uuid        NOT NULL,
  used       boolean     NOT NULL DEFAULT false,
  expires_at timestamptz NOT NULL DEFAULT now() + interval '10 minutes'
);

-- --- row-level security and grants -------------------------------------------------------
-- A device JWT (role authenticated, app_metadata.device_uuid) reaches its own
-- rows only. (SELECT public.device_uuid()) is evaluated once per statement,
-- not once per row.

ALTER TABLE public.entries ENABLE ROW LEVEL SECURITY;
CREATE POLICY entries_self_insert ON public.entries FOR INSERT TO authenticated
  WITH CHECK (device_uuid = (SELECT public.device_uuid()));
CREATE POLICY entries_self_select ON public.entries FOR SELECT TO authenticated
  USING (device_uuid = (SELECT public.device_uuid()));
GRANT SELECT, INSERT ON public.entries TO authenticated;   -- no UPDATE: a device does not rewrite what it sent

ALTER TABLE public.device_status ENABLE ROW LEVEL SECURITY;
CREATE POLICY device_status_self_insert ON public.device_status FOR INSERT TO authenticated
  WITH CHECK (device_uuid = (SELECT public.device_uuid()));
CREATE POLICY device_status_self_select ON public.device_status FOR SELECT TO authenticated
  USING (device_uuid = (SELECT public.device_uuid()));
CREATE POLICY device_status_self_update ON public.device_status FOR UPDATE TO authenticated
  USING (device_uuid = (SELECT public.device_uuid())) WITH CHECK (device_uuid = (SELECT public.device_uuid()));
GRANT SELECT, INSERT, UPDATE ON public.device_status TO authenticated;

ALTER TABLE public.breakpoint_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY breakpoint_events_self_insert ON public.breakpoint_events FOR INSERT TO authenticated
  WITH CHECK (device_uuid = (SELECT public.device_uuid()));
CREATE POLICY breakpoint_events_self_select ON public.breakpoint_events FOR SELECT TO authenticated
  USING (device_uuid = (SELECT public.device_uuid()));
CREATE POLICY breakpoint_events_self_update ON public.breakpoint_events FOR UPDATE TO authenticated
  USING (device_uuid = (SELECT public.device_uuid())) WITH CHECK (device_uuid = (SELECT public.device_uuid()));
GRANT SELECT, INSERT, UPDATE ON public.breakpoint_events TO authenticated;
GRANT USAGE ON SEQUENCE public.breakpoint_events_id_seq TO authenticated;

-- Settings are written by the dashboard (service_role); a device reads its own.
ALTER TABLE public.settings_device ENABLE ROW LEVEL SECURITY;
CREATE POLICY settings_device_self_select ON public.settings_device FOR SELECT TO authenticated
  USING (device_uuid = (SELECT public.device_uuid()));
GRANT SELECT ON public.settings_device TO authenticated;
GRANT SELECT ON public.settings_global TO authenticated;

ALTER TABLE public.devices ENABLE ROW LEVEL SECURITY;
CREATE POLICY devices_self_select ON public.devices FOR SELECT TO authenticated
  USING (device_uuid = (SELECT public.device_uuid()));
GRANT SELECT ON public.devices TO authenticated;

ALTER TABLE public.pairing_codes ENABLE ROW LEVEL SECURITY;   -- no policy: the edge function's business only

GRANT ALL ON ALL TABLES IN SCHEMA public TO service_role;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO service_role;

-- --- Realtime: broadcast from the database ---------------------------------------------------
-- Supabase's realtime.send() / realtime.broadcast_changes() write
-- realtime.messages, which the Realtime server relays to the topic's
-- subscribers. Here a NOTIFY on busymate_realtime carries the row's id to the
-- double, which relays it (the payload stays in the table: NOTIFY caps at 8 kB).

CREATE SCHEMA realtime;
GRANT USAGE ON SCHEMA realtime TO anon, authenticated, service_role;

CREATE TABLE realtime.messages (
  id          bigserial PRIMARY KEY,
  topic       text        NOT NULL,
  extension   text        NOT NULL DEFAULT 'broadcast',
  event       text,
  payload     jsonb,
  private     boolean     NOT NULL DEFAULT true,
  inserted_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION realtime.notify_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('busymate_realtime', NEW.id::text);
  RETURN NULL;
END $$;
CREATE TRIGGER messages_notify AFTER INSERT ON realtime.messages FOR EACH ROW EXECUTE FUNCTION realtime.notify_message();

CREATE FUNCTION realtime.send(payload jsonb, event text, topic text, private boolean DEFAULT true) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = realtime, pg_catalog AS $$
  INSERT INTO realtime.messages (topic, extension, event, payload, private) VALUES (topic, 'broadcast', event, payload, private)
$$;

CREATE FUNCTION realtime.broadcast_changes(topic_name text, event_name text, operation text, table_name text,
                                           table_schema text, new record, old record, level text DEFAULT 'ROW')
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = realtime, pg_catalog AS $$
BEGIN
  PERFORM realtime.send(jsonb_build_object('schema', table_schema, 'table', table_name, 'operation', operation,
                                           'record', CASE WHEN operation = 'DELETE' THEN NULL ELSE to_jsonb(new) END,
                                           'old_record', CASE WHEN operation = 'INSERT' THEN NULL ELSE to_jsonb(old) END),
                        event_name, topic_name, true);
END $$;
GRANT EXECUTE ON FUNCTION realtime.send(jsonb, text, text, boolean) TO authenticated, service_role;

-- Seed 000: "the broadcast_breakpoint trigger fans it to device:<uuid> +
-- breakpoint_events:all". The event name is not in the seed: TG_OP (INSERT /
-- UPDATE), as Supabase's broadcast_changes examples use, is a guess.
CREATE FUNCTION public.broadcast_breakpoint() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_catalog AS $$
BEGIN
  PERFORM realtime.broadcast_changes('device:' || NEW.device_uuid, TG_OP, TG_OP, TG_TABLE_NAME, TG_TABLE_SCHEMA, NEW, OLD);
  PERFORM realtime.broadcast_changes('breakpoint_events:all', TG_OP, TG_OP, TG_TABLE_NAME, TG_TABLE_SCHEMA, NEW, OLD);
  RETURN NULL;
END $$;
CREATE TRIGGER broadcast_breakpoint AFTER INSERT OR UPDATE ON public.breakpoint_events
  FOR EACH ROW EXECUTE FUNCTION public.broadcast_breakpoint();

-- --- Realtime: postgres_changes ----------------------------------------------------------------
-- Supabase's Realtime reads the WAL; here a trigger records each change of the
-- tables the devices subscribe to (seed 000: settings_device on device:<uuid>,
-- settings_global on settings:global, the devices row for renames) and
-- NOTIFYs busymate_changes with its id.

CREATE TABLE realtime.changes (
  id               bigserial PRIMARY KEY,
  schema_name      text        NOT NULL,
  table_name       text        NOT NULL,
  type             text        NOT NULL,      -- INSERT / UPDATE / DELETE
  record           jsonb,
  old_record       jsonb,
  commit_timestamp timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION realtime.capture_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = realtime, pg_catalog AS $$
DECLARE change_id bigint;
BEGIN
  INSERT INTO realtime.changes (schema_name, table_name, type, record, old_record)
  VALUES (TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP,
          CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END,
          CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END)
  RETURNING id INTO change_id;
  PERFORM pg_notify('busymate_changes', change_id::text);
  RETURN NULL;
END $$;

CREATE TRIGGER settings_device_changes AFTER INSERT OR UPDATE OR DELETE ON public.settings_device
  FOR EACH ROW EXECUTE FUNCTION realtime.capture_change();
CREATE TRIGGER settings_global_changes AFTER INSERT OR UPDATE OR DELETE ON public.settings_global
  FOR EACH ROW EXECUTE FUNCTION realtime.capture_change();
CREATE TRIGGER devices_changes AFTER INSERT OR UPDATE OR DELETE ON public.devices
  FOR EACH ROW EXECUTE FUNCTION realtime.capture_change();
