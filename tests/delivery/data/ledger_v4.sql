BEGIN TRANSACTION;
CREATE TABLE audit (
	id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	platform VARCHAR(32) NOT NULL, 
	user_id VARCHAR(128) NOT NULL, 
	action VARCHAR(64) NOT NULL, 
	args TEXT NOT NULL, 
	allowed BOOLEAN NOT NULL, 
	outcome TEXT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "audit" VALUES(1,'2026-03-02 00:00:00.000000','fake','7','repost','{}',1,'sent 3');
CREATE TABLE deliveries (
	id INTEGER NOT NULL, 
	issue_date DATE NOT NULL, 
	revision VARCHAR(32) NOT NULL, 
	platform VARCHAR(32) NOT NULL, 
	generation INTEGER NOT NULL, 
	forced BOOLEAN NOT NULL, 
	parts INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (issue_date, revision, platform, generation)
);
INSERT INTO "deliveries" VALUES(1,'2026-10-27','e667c59367ad','fake',1,0,3,'2026-03-02 00:00:00.000000');
CREATE TABLE leases (
	name VARCHAR(128) NOT NULL, 
	owner VARCHAR(255) NOT NULL, 
	expires_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE ledger_identity (
	"key" INTEGER NOT NULL, 
	id VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "ledger_identity" VALUES(1,'aa87bb6166404108af9f872b7f403d33','2026-03-02 00:00:00.000000');
CREATE TABLE parts (
	id INTEGER NOT NULL, 
	delivery_id INTEGER NOT NULL, 
	target VARCHAR(128) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	part INTEGER NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	message_id VARCHAR(128), 
	attempts INTEGER NOT NULL, 
	last_error TEXT, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (delivery_id, target, part), 
	FOREIGN KEY(delivery_id) REFERENCES deliveries (id)
);
INSERT INTO "parts" VALUES(1,1,'c0','private',0,'sent','m1',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
INSERT INTO "parts" VALUES(2,1,'c0','private',1,'sent','m2',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
INSERT INTO "parts" VALUES(3,1,'c0','private',2,'sent','m3',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
INSERT INTO "parts" VALUES(4,1,'c1','private',0,'sent','m4',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
INSERT INTO "parts" VALUES(5,1,'c1','private',1,'sent','m5',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
INSERT INTO "parts" VALUES(6,1,'c1','private',2,'sent','m6',1,NULL,'2026-03-02 00:00:00.000000','2026-03-02 00:00:00.000000');
CREATE TABLE schema_version (
	version INTEGER NOT NULL, 
	PRIMARY KEY (version)
);
INSERT INTO "schema_version" VALUES(4);
CREATE TABLE subscribers (
	platform VARCHAR(32) NOT NULL, 
	chat_id VARCHAR(128) NOT NULL, 
	active BOOLEAN NOT NULL, 
	since DATETIME NOT NULL, 
	until DATETIME, 
	PRIMARY KEY (platform, chat_id)
);
INSERT INTO "subscribers" VALUES('fake','42',1,'2026-03-02 00:00:00.000000',NULL);
CREATE TABLE targets (
	platform VARCHAR(32) NOT NULL, 
	target_id VARCHAR(128) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	active BOOLEAN NOT NULL, 
	moved_to VARCHAR(128), 
	reason TEXT, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (platform, target_id)
);
CREATE INDEX ix_parts_target ON parts (target);
CREATE INDEX ix_parts_state ON parts (state);
CREATE INDEX ix_parts_updated ON parts (updated_at, id);
COMMIT;
